package backend

import "testing"

func TestCountApplied(t *testing.T) {
	p := &JobFinishManyParams{Finishes: []JobFinish{
		{Lease: LeaseRef{ID: 1, Fence: 1}, Outcome: OutcomeComplete},
		{Lease: LeaseRef{ID: 2, Fence: 1}, Outcome: OutcomeComplete},
		{Lease: LeaseRef{ID: 3, Fence: 1}, Outcome: OutcomeRetry},
		{Lease: LeaseRef{ID: 4, Fence: 2}, Outcome: OutcomeComplete},
	}}
	complete := func(f JobFinish) bool { return f.Outcome == OutcomeComplete }
	for _, tc := range []struct {
		rejected []LeaseRef
		match    func(JobFinish) bool
		want     int
	}{
		{nil, nil, 4},
		{nil, complete, 3},
		{[]LeaseRef{{ID: 2, Fence: 1}}, complete, 2},
		// Only the exact lease is rejected: job 4 under fence 1 is another lease.
		{[]LeaseRef{{ID: 4, Fence: 1}}, complete, 3},
		{[]LeaseRef{{ID: 1, Fence: 1}, {ID: 3, Fence: 1}}, nil, 2},
	} {
		r := &JobFinishManyResult{Rejected: tc.rejected}
		if got := r.CountApplied(p, tc.match); got != tc.want {
			t.Errorf("rejected %v: CountApplied = %d, want %d", tc.rejected, got, tc.want)
		}
	}
}
