package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/spoolq/spool/backend"
)

// JobInsertDebounced implements backend.Backend. The store's one mutex
// serialises the inserts of a key. In a *Tx a new job stays invisible until
// the commit, as JobInsertMany's; moving a pending job's run time is not
// transactional on this store: it applies at once.
func (b *Backend) JobInsertDebounced(ctx context.Context, p *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	if s.debounce == nil {
		s.debounce = map[string]*backend.JobRow{}
	}
	if j, ok := s.debounce[p.Key]; ok && (s.jobs[j.ID] == j || s.inOpenTx[j]) && pending(j.State) {
		j.RunAt = backend.DebounceRunAt(t, j.RunAt, j.CreatedAt, p.Window, p.MaxWait)
		if j.State == backend.StateAvailable && j.RunAt.After(t) {
			j.State = backend.StateScheduled
		}
		if p.ReplaceArgs {
			j.Args = slices.Clone(p.Job.Args)
		}
		res := &backend.JobDebounceResult{ID: j.ID, Debounced: true}
		s.mu.Unlock()
		return res, nil
	}
	jp := *p.Job
	jp.RunAt, jp.Delay = nil, backend.DebounceFirstDelay(p.Window, p.MaxWait)
	jp.UniqueKey, jp.UniqueStates = "", 0
	s.nextID++
	r := newRow(s.nextID, &jp, t)
	s.debounce[p.Key] = r
	var wakes []backend.Wake
	if tx == nil {
		s.jobs[r.ID] = r
		wakes = runnable([]*backend.JobRow{r}, t)
	} else {
		s.inOpenTx[r] = true
	}
	res := &backend.JobDebounceResult{ID: r.ID}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts([]*backend.JobRow{r}); err != nil {
			s.mu.Lock()
			s.forgetTxRows([]*backend.JobRow{r})
			s.mu.Unlock()
			return nil, fmt.Errorf("insert debounced job: %w", err)
		}
	}
	s.hub.Publish(wakes...)
	return res, nil
}

// JobFinishedSince implements backend.Backend.
func (b *Backend) JobFinishedSince(ctx context.Context, p *backend.JobFinishedSinceParams) ([]*backend.FinishedJob, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	s := b.s
	s.mu.Lock()
	var out []*backend.FinishedJob
	for _, j := range s.jobs {
		if finished(j.State) && j.FinalizedAt != nil && p.After(*j.FinalizedAt, j.ID) {
			out = append(out, &backend.FinishedJob{ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: j.State, FinalizedAt: *j.FinalizedAt})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(a, c int) bool {
		if !out[a].FinalizedAt.Equal(out[c].FinalizedAt) {
			return out[a].FinalizedAt.Before(out[c].FinalizedAt)
		}
		return out[a].ID < out[c].ID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
