package postgres

import "testing"

// TestSmallClaimsFollowShortClaims: a queue's next claim is small after a
// claim that came back short of its ask with fewer than smallClaimMax
// jobs, large after one of smallClaimMax or more, and unchanged after a
// claim that got all of a small ask (a second claim of 16 from a backlog
// says nothing about the backlog's size).
func TestSmallClaimsFollowShortClaims(t *testing.T) {
	var s smallClaims
	steps := []struct {
		got, asked int
		want       bool
	}{
		{1000, 1000, false},
		{16, 16, false}, // full: still large
		{3, 16, true},   // short: small
		{16, 16, true},  // full: still small
		{0, 1100, true},
		{smallClaimMax, 1100, false},
		{smallClaimMax - 1, smallClaimMax - 1, false},
		{smallClaimMax - 1, smallClaimMax, true},
	}
	if s.next("q") {
		t.Fatal("a queue never claimed: next claim small, want large")
	}
	for i, st := range steps {
		s.claimed("q", st.got, st.asked)
		if got := s.next("q"); got != st.want {
			t.Errorf("step %d: after a claim of %d of %d asked, next small = %v, want %v", i, st.got, st.asked, got, st.want)
		}
	}
	if s.next("other") {
		t.Error("queue other took q's state")
	}
}
