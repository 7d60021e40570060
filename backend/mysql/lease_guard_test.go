package mysql

import "testing"

func TestLeaseGuard(t *testing.T) {
	for _, c := range []struct {
		ids    []int64
		fences []int32
		want   string
	}{
		{[]int64{1}, []int32{3}, " AND fence = 3"},
		{[]int64{1, 2, 5}, []int32{1, 1, 1}, " AND fence = 1"},
		{[]int64{1, 2, 5, 7}, []int32{2, 1, 2, 4}, " AND (fence = 2 AND id IN (1,5) OR fence = 1 AND id IN (2) OR fence = 4 AND id IN (7))"},
		// Two leases of one job: the row matches either.
		{[]int64{4, 4}, []int32{1, 2}, " AND (fence = 1 AND id IN (4) OR fence = 2 AND id IN (4))"},
		// More distinct fences than leaseGuardArms: the row list.
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, " AND (id, fence) IN ((1,1),(2,2),(3,3),(4,4),(5,5),(6,6),(7,7),(8,8),(9,9))"},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8}, []int32{1, 2, 3, 4, 5, 6, 7, 8}, " AND (fence = 1 AND id IN (1) OR fence = 2 AND id IN (2) OR fence = 3 AND id IN (3) OR fence = 4 AND id IN (4) OR fence = 5 AND id IN (5) OR fence = 6 AND id IN (6) OR fence = 7 AND id IN (7) OR fence = 8 AND id IN (8))"},
	} {
		if got := leaseGuard(c.ids, c.fences); got != c.want {
			t.Errorf("leaseGuard(%v, %v) = %q, want %q", c.ids, c.fences, got, c.want)
		}
	}
}
