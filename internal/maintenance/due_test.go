package maintenance

import (
	"testing"
	"time"
)

// TestDueAfterNextTick: work done at one tick and due an interval of one
// tick later is due at the next tick, whichever of the two ticks the loop
// woke up later after.
func TestDueAfterNextTick(t *testing.T) {
	const tick = time.Second
	t0 := time.Unix(1_700_000_000, 0)
	for _, delays := range [][2]time.Duration{
		{3 * time.Millisecond, time.Millisecond}, // the second wake-up the quicker
		{time.Millisecond, 3 * time.Millisecond},
		{0, 0},
		{400 * time.Millisecond, 0}, // a loaded machine
	} {
		first := t0.Add(delays[0])
		second := t0.Add(tick + delays[1])
		if due := dueAfter(first, tick, tick); second.Before(due) {
			t.Errorf("wake-up delays %v: due at %s, after the next tick's reading %s: the work skips a tick",
				delays, due.Sub(t0), second.Sub(t0))
		}
	}
	// An interval of three ticks is due at the third tick, not the second.
	first, second := t0.Add(time.Millisecond), t0.Add(2*tick)
	if due := dueAfter(first, 3*tick, tick); !second.Before(due) {
		t.Errorf("three ticks' interval due at %s, by the second tick", due.Sub(t0))
	}
}
