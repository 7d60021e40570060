package backend

import (
	"slices"
	"testing"
)

// Each registration is its own, even of equal values: removing one leaves
// the other; Range stops where its function says; WakeDemands.Waiting
// asks the functions until one reports an idle worker.
func TestRegistrations(t *testing.T) {
	var r Registrations[string]
	removeA := r.Add("q")
	r.Add("q")
	r.Add("z")
	removeA()
	removeA() // a second call removes nothing more
	var got []string
	r.Range(func(v string) bool { got = append(got, v); return true })
	if !slices.Equal(got, []string{"q", "z"}) {
		t.Fatalf("after one of two equal values was removed: %v, want [q z]", got)
	}
	got = nil
	r.Range(func(v string) bool { got = append(got, v); return false })
	if len(got) != 1 {
		t.Fatalf("Range went on after false: %v", got)
	}

	var d WakeDemands
	if d.Waiting() {
		t.Fatal("waiting with nothing registered")
	}
	asked := 0
	d.Add(func() bool { asked++; return false })
	removeIdle := d.Add(func() bool { asked++; return true })
	d.Add(func() bool { asked++; return true })
	if !d.Waiting() || asked != 2 {
		t.Fatalf("Waiting asked %d functions, want 2 and true", asked)
	}
	removeIdle()
	asked = 0
	if !d.Waiting() || asked != 2 {
		t.Fatalf("after a removal Waiting asked %d functions, want 2 and true", asked)
	}
}
