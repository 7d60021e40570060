package claimpick

import "testing"

type item struct {
	id       int
	priority int16
}

func prio(it item) int16 { return it.priority }

// window builds a window in claim order of the given priorities, ids 0..n-1.
func window(priorities ...int16) []item {
	w := make([]item, len(priorities))
	for i, p := range priorities {
		w[i] = item{id: i, priority: p}
	}
	return w
}

func TestPickShortWindowWhole(t *testing.T) {
	w := window(1, 2, 3)
	got := Pick(w, 3, prio)
	if len(got) != 3 || got[0].id != 0 || got[1].id != 1 || got[2].id != 2 {
		t.Fatalf("Pick of a window no longer than want = %v, want it as it is", got)
	}
}

func TestPickNeverPassesOverABetterPriority(t *testing.T) {
	for range 200 {
		got := Pick(window(0, 0, 1, 1, 1, 1, 2, 2), 4, prio)
		if len(got) != 4 {
			t.Fatalf("Pick returned %d items, want 4", len(got))
		}
		if got[0].id != 0 || got[1].id != 1 {
			t.Fatalf("Pick = %v: the whole best priority (ids 0 and 1) must come first", got)
		}
		seen := map[int]bool{}
		for _, it := range got[2:] {
			if it.priority != 1 {
				t.Fatalf("Pick = %v: took priority %d before priority 1 was exhausted", got, it.priority)
			}
			if seen[it.id] {
				t.Fatalf("Pick = %v: id %d picked twice", got, it.id)
			}
			seen[it.id] = true
		}
	}
}

func TestPickSamplesTheLastTier(t *testing.T) {
	// One of ten equal rows, 200 times: all picks landing on one row would
	// mean no sampling (chance (1/10)^199 if the pick is uniform).
	seen := map[int]bool{}
	for range 200 {
		got := Pick(window(5, 5, 5, 5, 5, 5, 5, 5, 5, 5), 1, prio)
		if len(got) != 1 {
			t.Fatalf("Pick returned %d items, want 1", len(got))
		}
		seen[got[0].id] = true
	}
	if len(seen) < 2 {
		t.Fatalf("Pick chose the same row every time (%v): the tier is not sampled", seen)
	}
}
