package backend

import "testing"

// The quick claim's rule, case by case: the global limit's free slots for
// workers, its lower half for prefetch, the per-key decline with the whole
// lock, and the striped shares.
func TestFlowQuickAllowed(t *testing.T) {
	for _, tc := range []struct {
		name          string
		q             FlowQuick
		live, busiest int
		striped       bool
		want          int
	}{
		{"no limit takes all asked", FlowQuick{Want: 5, Extra: 7}, 0, 0, false, 12},
		{"global: workers up to the free slots", FlowQuick{Want: 10, Limit: 20}, 15, 15, false, 5},
		{"global: full", FlowQuick{Want: 10, Extra: 10, Limit: 20}, 20, 20, false, 0},
		{"global: over (leases counted late)", FlowQuick{Want: 10, Limit: 20}, 25, 25, false, 0},
		{"global: prefetch only in the lower half", FlowQuick{Want: 4, Extra: 10, Limit: 20}, 3, 3, false, 4 + 3},
		{"global: no prefetch past half", FlowQuick{Want: 4, Extra: 10, Limit: 20}, 8, 8, false, 4},
		{"key: within the limit", FlowQuick{Want: 3, Extra: 2, KeyLimit: 10}, 9, 5, false, 5},
		{"key: a key could pass it: declined", FlowQuick{Want: 3, Extra: 2, KeyLimit: 10}, 9, 6, false, 0},
		{"striped: share of each limit", FlowQuick{Want: 50, Limit: 800, KeyLimit: 80, Stripes: 4}, 100, 10, true, 10},
		{"striped: global share", FlowQuick{Want: 150, Limit: 800, Stripes: 4}, 100, 100, true, 100},
		{"striped: room for every stripe", FlowQuick{Want: 2, Limit: 16, Stripes: 4}, 8, 8, true, 2},
		{"striped: not enough room for every stripe", FlowQuick{Want: 2, Limit: 16, Stripes: 4}, 9, 9, true, 0},
		{"striped: key near its limit", FlowQuick{Want: 2, KeyLimit: 16, Stripes: 4}, 9, 9, true, 0},
		{"striped: asked less than the share", FlowQuick{Want: 1, Extra: 0, Limit: 800, Stripes: 4}, 0, 0, true, 1},
	} {
		if got := tc.q.Allowed(tc.live, tc.busiest, tc.striped); got != tc.want {
			t.Errorf("%s: Allowed(%d, %d, %v) of %+v = %d, want %d", tc.name, tc.live, tc.busiest, tc.striped, tc.q, got, tc.want)
		}
	}
}
