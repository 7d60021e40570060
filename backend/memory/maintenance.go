package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobRescue implements backend.Backend. A rescued job keeps its run_at, and
// so its place in the queue.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var expired []*backend.JobRow
	for _, j := range s.jobs {
		if j.State == backend.StateRunning && j.LeasedUntil != nil && j.LeasedUntil.Before(t) {
			expired = append(expired, j)
		}
	}
	slices.SortFunc(expired, func(a, b *backend.JobRow) int {
		return cmp.Or(a.LeasedUntil.Compare(*b.LeasedUntil), cmp.Compare(a.ID, b.ID))
	})
	if max := p.MaxOrDefault(); len(expired) > max {
		expired = expired[:max]
	}
	res := &backend.JobRescueResult{}
	var wakes []backend.Wake
	for _, j := range expired {
		j.Errors = append(j.Errors, backend.AttemptError{Attempt: int(j.Attempt), At: t,
			Error: "lease expired: the worker " + j.LeasedBy + " stopped heartbeating (crashed, killed, paused or cut off from the database)"})
		j.LeasedUntil, j.LeasedBy = nil, ""
		if j.Attempt >= j.MaxAttempts {
			j.State, j.FinalizedAt = backend.StateDiscarded, timePtr(t)
			res.Discarded++
			if j.HasDependents {
				wakes = append(wakes, s.settle([]int64{j.ID}, t)...)
			}
			continue
		}
		j.State = backend.StateRetryable
		res.Retried++
		wakes = append(wakes, backend.Wake{Queue: j.Queue})
	}
	s.mu.Unlock()
	s.hub.Publish(wakes...)
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	b.s.pruneRates(now().Add(-time.Hour))
	if err := b.check(); err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	t := now()
	age := map[backend.State]time.Duration{
		backend.StateCompleted: p.CompletedAge,
		backend.StateDiscarded: p.DiscardedAge,
		backend.StateCancelled: p.CancelledAge,
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n, max := 0, p.MaxOrDefault()
	for id, j := range s.jobs {
		if n >= max {
			break
		}
		if a := age[j.State]; a > 0 && j.FinalizedAt != nil && j.FinalizedAt.Before(t.Add(-a)) && !s.retained(j) {
			s.deleteJob(id)
			n++
		}
	}
	return n, nil
}

// LeaderElect implements backend.Backend: ClientID leads Name if it led it
// already or the last term has expired.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	if err := b.check(); err != nil {
		return false, fmt.Errorf("elect leader %q: %w", p.Name, err)
	}
	t := now()
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	l, ok := b.s.leaders[p.Name]
	if ok && l.id != p.ClientID && !l.expires.Before(t) {
		return false, nil
	}
	b.s.leaders[p.Name] = leader{id: p.ClientID, expires: t.Add(p.TTL)}
	return true, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("resign leader %q: %w", p.Name, err)
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if l, ok := b.s.leaders[p.Name]; ok && l.id == p.ClientID {
		delete(b.s.leaders, p.Name)
	}
	return nil
}
