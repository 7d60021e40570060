package flow

import (
	"testing"
	"time"
)

func TestAllocateWeights(t *testing.T) {
	// Over many claims of one unit each, with credits carried between
	// them, weights 3:1 give 3:1.
	credit := map[string]int{}
	got := map[string]int{}
	for range 400 {
		gs := []*group{{key: "a", weight: 3, cap: 1}, {key: "b", weight: 1, cap: 1}}
		allocate(gs, credit, 1)
		for _, g := range gs {
			got[g.key] += g.quota
		}
	}
	if got["a"] != 300 || got["b"] != 100 {
		t.Fatalf("shares %v, want a 300, b 100", got)
	}
}

func TestAllocateCapsAndWorkConserving(t *testing.T) {
	gs := []*group{{key: "a", weight: 1, cap: 2}, {key: "b", weight: 5, cap: 1}, {key: "c", weight: 1, cap: 10}}
	allocate(gs, map[string]int{}, 8)
	want := map[string]int{"a": 2, "b": 1, "c": 5}
	for _, g := range gs {
		if g.quota != want[g.key] {
			t.Fatalf("key %s got %d, want %d (caps bind, the rest goes to who has room)", g.key, g.quota, want[g.key])
		}
	}
	none := []*group{{key: "a", weight: 1, cap: 0}}
	allocate(none, map[string]int{}, 3)
	if none[0].quota != 0 {
		t.Fatalf("a group at its cap got %d", none[0].quota)
	}
}

func TestAllocateEveryGroupWithinARound(t *testing.T) {
	// 50 groups, weight 1, budget 10 per claim: every group gets a unit
	// within 5 claims.
	credit := map[string]int{}
	seen := map[string]bool{}
	for range 5 {
		var gs []*group
		for i := range 50 {
			gs = append(gs, &group{key: string(rune('A' + i)), weight: 1, cap: 10})
		}
		allocate(gs, credit, 10)
		for _, g := range gs {
			if g.quota > 0 {
				seen[g.key] = true
			}
		}
	}
	if len(seen) != 50 {
		t.Fatalf("%d of 50 groups served in 5 claims", len(seen))
	}
}

func TestRateInterval(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		want time.Duration
	}{
		{Rate{Limit: 5, Per: 500 * time.Millisecond, Burst: 2}, 125 * time.Millisecond},
		{Rate{Limit: 3, Per: time.Second, Burst: 1}, 333334 * time.Microsecond}, // rounded up
		{Rate{Limit: 1_000_000, Per: time.Millisecond, Burst: 1}, time.Microsecond},
	} {
		if got := c.r.interval(); got != c.want {
			t.Fatalf("%+v: interval %s, want %s", c.r, got, c.want)
		}
	}
}
