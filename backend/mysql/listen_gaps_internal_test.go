package mysql

import (
	"slices"
	"testing"
)

// newJobGaps adds the ids a read passed over, ages the gaps it had, drops
// those looked for gapLooks times, and keeps none of a read's missing ids
// when they are more than gapMax (a range left unused, no insert in
// flight).
func TestNewJobGaps(t *testing.T) {
	idsOf := func(gs []jobGap) []int64 {
		var out []int64
		for _, g := range gs {
			out = append(out, g.id)
		}
		return out
	}
	gs := newJobGaps(nil, 10, []int64{12, 13, 16})
	if got := idsOf(gs); !slices.Equal(got, []int64{11, 14, 15}) {
		t.Fatalf("gaps after reading 12, 13, 16 above 10: %v, want [11 14 15]", got)
	}
	for range gapLooks - 1 {
		gs = newJobGaps(gs, 16, nil)
	}
	if len(gs) != 3 {
		t.Fatalf("%d gaps after %d more reads, want 3", len(gs), gapLooks-1)
	}
	if gs = newJobGaps(gs, 16, nil); len(gs) != 0 {
		t.Fatalf("gaps %v after %d reads, want none", idsOf(gs), gapLooks)
	}
	if gs = newJobGaps(nil, 100, []int64{100 + gapMax + 2}); len(gs) != 0 {
		t.Fatalf("%d gaps kept of a read that passed over %d ids, want none", len(gs), gapMax+1)
	}
	if gs = newJobGaps(nil, 100, []int64{101, 102}); len(gs) != 0 {
		t.Fatalf("gaps %v of a read with none, want none", idsOf(gs))
	}
}
