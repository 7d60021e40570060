package claimsize

import "testing"

// TestExpect: small after a claim that came back short of its ask with
// fewer than Max jobs, large after one of Max or more, unchanged after a
// full claim of a small ask, and large for a queue never claimed from;
// queues apart.
func TestExpect(t *testing.T) {
	e := &Expect{Max: 32}
	if e.Small("q") {
		t.Fatal("a queue never claimed from is expected small")
	}
	for i, c := range []struct {
		n, asked int
		want     bool
	}{
		{3, 100, true},
		{32, 1100, false},
		{31, 31, false}, // full, of a small ask: unchanged
		{31, 32, true},
		{16, 16, true}, // unchanged
		{1100, 1100, false},
	} {
		e.Claimed("q", c.n, c.asked)
		if got := e.Small("q"); got != c.want {
			t.Fatalf("step %d: after %d of %d, small %v, want %v", i, c.n, c.asked, got, c.want)
		}
	}
	if e.Small("other") {
		t.Fatal("another queue took q's expectation")
	}
}
