package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobClaim implements backend.Backend.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, paused := s.paused[p.Queue]; paused {
		return nil, nil
	}
	var due []*backend.JobRow
	for _, j := range s.jobs {
		if j.Queue == p.Queue && pending(j.State) && !j.RunAt.After(t) {
			due = append(due, j)
		}
	}
	slices.SortFunc(due, backend.ClaimOrder)
	if len(due) > p.Max {
		due = due[:max(p.Max, 0)]
	}
	out := make([]*backend.JobRow, len(due))
	for i, j := range due {
		markClaimed(j, t, p.Lease, p.ClaimID)
		out[i] = copyRow(j)
	}
	return out, nil
}

// markClaimed leases j to claimID at t; s.mu is held.
func markClaimed(j *backend.JobRow, t time.Time, lease time.Duration, claimID string) {
	j.State = backend.StateRunning
	j.Attempt++
	j.Fence++
	j.LeasedUntil = timePtr(t.Add(lease))
	j.LeasedBy = claimID
	j.AttemptedAt = timePtr(t)
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	if err := b.check(); err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	s := b.s
	s.mu.Lock()
	var wakes []backend.Wake
	n := 0
	for _, j := range s.jobs {
		if j.State == backend.StateRunning && j.LeasedBy == p.ClaimID {
			j.State, j.LeasedUntil, j.LeasedBy = backend.StateAvailable, nil, ""
			j.Attempt--
			n++
			wakes = append(wakes, backend.Wake{Queue: j.Queue})
		}
	}
	s.mu.Unlock()
	s.hub.Publish(wakes...)
	return n, nil
}
