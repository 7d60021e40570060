package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// JobBulk implements backend.Backend.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	var taken []*backend.JobRow
	for _, j := range s.jobs {
		if p.Selects(j) && (p.Action != backend.BulkDelete || !j.HasDependents) {
			taken = append(taken, j)
		}
	}
	slices.SortFunc(taken, func(a, b *backend.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	taken = taken[:min(len(taken), p.MaxOrDefault())]
	res := &backend.JobBulkResult{Taken: len(taken)}
	var wakes []backend.Wake
	for _, j := range taken {
		res.LastID = j.ID
		switch p.Action {
		case backend.BulkRetry:
			if backend.NeedsKeyBack(j) {
				res.UniqueRetries = append(res.UniqueRetries, j.ID)
				continue
			}
			j.State, j.Attempt, j.RunAt, j.FinalizedAt = backend.StateAvailable, 0, t, nil
			wakes = append(wakes, backend.Wake{Queue: j.Queue})
		case backend.BulkCancel:
			if j.State == backend.StateRunning {
				wakes = append(wakes, backend.Wake{CancelledID: j.ID})
			}
			j.State, j.FinalizedAt, j.LeasedUntil, j.LeasedBy = backend.StateCancelled, timePtr(t), nil, ""
			j.WaitKind = ""
			if j.HasDependents {
				wakes = append(wakes, s.settle([]int64{j.ID}, t)...)
			}
		case backend.BulkDelete:
			s.deleteJob(j.ID)
		}
		res.Changed++
	}
	s.mu.Unlock()
	s.hub.Publish(wakes...)
	return res, nil
}
