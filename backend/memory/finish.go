package memory

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend. In a *Tx (spool.CompleteTx) the
// leases are checked now and the outcomes applied at the commit.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var (
		applied []backend.LeaseRef
		wakes   []backend.Wake
		held    []backend.JobFinish
	)
	for _, f := range p.Finishes {
		j, ok := s.held(f.Lease)
		if !ok {
			continue
		}
		applied = append(applied, f.Lease)
		if tx != nil {
			held = append(held, f)
			continue
		}
		if w, ok := s.finish(j, f, p.DeleteCompleted, t); ok {
			wakes = append(wakes, w)
		}
		if j.HasDependents {
			wakes = append(wakes, s.settle([]int64{j.ID}, t)...)
		}
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addFinishes(held, p.DeleteCompleted); err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
	}
	s.hub.Publish(wakes...)
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(p.Finishes, applied, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}
