package postgres

import (
	"slices"
	"testing"

	"github.com/spoolq/spool/backend"
)

// TestAppliedExcept checks how the entries a statement did not apply are
// taken out of its batch: one entry per pair missed, a repeated pair's
// other entries kept, indexes outside idx never read.
func TestAppliedExcept(t *testing.T) {
	ids := []int64{1, 2, 2, 3, 4, 5}
	fences := []int32{1, 1, 1, 7, 1, 1}
	l := func(id int64, fence int32) backend.LeaseRef { return backend.LeaseRef{ID: id, Fence: fence} }
	for _, tc := range []struct {
		name   string
		idx    []int
		missed []backend.LeaseRef
		want   []backend.LeaseRef
	}{
		{"none missed", []int{0, 1, 3}, nil, []backend.LeaseRef{l(1, 1), l(2, 1), l(3, 7)}},
		{"one missed", []int{0, 3, 4}, []backend.LeaseRef{l(3, 7)}, []backend.LeaseRef{l(1, 1), l(4, 1)}},
		{"one of a repeated pair", []int{1, 2, 5}, []backend.LeaseRef{l(2, 1)}, []backend.LeaseRef{l(2, 1), l(5, 1)}},
		{"all missed", []int{4, 5}, []backend.LeaseRef{l(5, 1), l(4, 1)}, []backend.LeaseRef{}},
		{"a miss under another fence", []int{3}, []backend.LeaseRef{l(3, 6)}, []backend.LeaseRef{l(3, 7)}},
	} {
		if got := appliedExcept(ids, fences, tc.idx, tc.missed); !slices.Equal(got, tc.want) {
			t.Errorf("%s: applied %v, want %v", tc.name, got, tc.want)
		}
	}
}
