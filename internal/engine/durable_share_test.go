package engine

import "testing"

// TestNoteRunDecidesInPlace: a queue's claims keep jobs in place once a
// quarter of a window of its runs wrote durable records, and no longer
// after a window with fewer.
func TestNoteRunDecidesInPlace(t *testing.T) {
	var p producer
	run := func(n, durable int) {
		for i := range n {
			p.noteRun(i < durable)
		}
	}
	run(durableWindow-1, durableWindow/4)
	if p.durable.Load() {
		t.Fatal("in place before a window had passed")
	}
	run(1, 0)
	if !p.durable.Load() {
		t.Fatalf("not in place after a window with %d of %d runs durable", durableWindow/4, durableWindow)
	}
	run(durableWindow, durableWindow/4-1)
	if p.durable.Load() {
		t.Fatalf("still in place after a window with %d of %d runs durable", durableWindow/4-1, durableWindow)
	}
}
