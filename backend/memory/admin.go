package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	j, ok := b.s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	return copyRow(j), nil
}

// JobList implements backend.Backend: jobs in id order.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var pending []*backend.JobRow // the transaction's own inserts
	if tx != nil {
		tx.mu.Lock()
		pending = slices.Clone(tx.inserts)
		tx.mu.Unlock()
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var out []*backend.JobRow
	for _, j := range append(slices.Collect(maps.Values(b.s.jobs)), pending...) {
		if j.ID > p.AfterID && (p.BeforeID == 0 || j.ID < p.BeforeID) &&
			(p.Queue == "" || j.Queue == p.Queue) && (p.Kind == "" || j.Kind == p.Kind) &&
			(len(p.States) == 0 || slices.Contains(p.States, j.State)) &&
			(p.CreatedAfter.IsZero() || j.CreatedAt.After(p.CreatedAfter)) &&
			(p.CreatedBefore.IsZero() || j.CreatedAt.Before(p.CreatedBefore)) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *backend.JobRow) int {
		if p.Newest {
			return cmp.Compare(b.ID, a.ID)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if limit := p.LimitOrDefault(); len(out) > limit {
		out = out[:limit]
	}
	for i, j := range out {
		out[i] = copyRow(j)
	}
	return out, nil
}

// JobRetry implements backend.Backend: a job that is not running becomes
// available now with a fresh set of attempts; its fence is kept, so old
// leases stay fenced out.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	conflict := false
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if j.State == backend.StateRunning || j.State == backend.StateWaiting {
			return false
		}
		if j.UniqueKey != "" && !j.UniqueStates.Has(j.State) {
			// The job takes its key back: refused while another holds it.
			if h, held := b.s.holder(j.UniqueKey); held && h != j {
				conflict = true
				return false
			}
			b.s.unique[j.UniqueKey] = j
		}
		j.State, j.Attempt, j.RunAt, j.FinalizedAt = backend.StateAvailable, 0, t, nil
		return true
	})
	if conflict {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, backend.ErrUniqueConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, err)
	}
	b.s.hub.Publish(backend.Wake{Queue: j.Queue})
	return j, nil
}

// JobCancel implements backend.Backend. A running job's lease holders are
// woken with its id, so the handler stops at once.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	wasRunning := false
	var settled []backend.Wake
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if finished(j.State) {
			return false
		}
		wasRunning = j.State == backend.StateRunning
		j.State, j.FinalizedAt, j.LeasedUntil, j.LeasedBy = backend.StateCancelled, timePtr(t), nil, ""
		j.WaitKind = ""
		if j.HasDependents {
			settled = b.s.settle([]int64{j.ID}, t)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	b.s.hub.Publish(settled...)
	if wasRunning {
		b.s.hub.Publish(backend.Wake{CancelledID: j.ID})
	}
	return j, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	j, err := b.change(p.ID, func(j *backend.JobRow, t time.Time) bool {
		if j.State == backend.StateRunning || j.State == backend.StateWaiting || j.HasDependents {
			return false
		}
		b.s.deleteJob(j.ID)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d: %w", p.ID, err)
	}
	return j, nil
}

// JobThroughput implements backend.Backend.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	since := now().Add(-p.Window)
	buckets := backend.Throughput{}
	b.s.mu.Lock()
	for _, j := range b.s.jobs {
		if j.FinalizedAt == nil || j.FinalizedAt.Before(since) || !finished(j.State) || (p.Queue != "" && j.Queue != p.Queue) {
			continue
		}
		buckets.Add(*j.FinalizedAt, j.State, p.BucketSeconds())
	}
	b.s.mu.Unlock()
	return buckets.Sorted(), nil
}

// change applies fn to job id; fn reports whether the change applies to the
// job's state (backend.ErrInvalidState otherwise).
func (b *Backend) change(id int64, fn func(j *backend.JobRow, t time.Time) bool) (*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	j, ok := b.s.jobs[id]
	if !ok {
		return nil, backend.ErrNotFound
	}
	if !fn(j, now()) {
		return nil, backend.ErrInvalidState
	}
	return copyRow(j), nil
}

// QueueStatsAll implements backend.Backend: counts by queue and state, in
// queue order.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	b.s.mu.Lock()
	counts := backend.QueueCounts{}
	for _, j := range b.s.jobs {
		counts.Add(j.Queue, j.State, 1)
	}
	b.s.mu.Unlock()
	return counts.Sorted(), nil
}

// QueuePause implements backend.Backend.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, err)
	}
	b.s.mu.Lock()
	_, was := b.s.paused[p.Queue]
	switch {
	case p.Paused && !was:
		b.s.paused[p.Queue] = now()
	case !p.Paused:
		delete(b.s.paused, p.Queue)
	}
	b.s.mu.Unlock()
	if !p.Paused && was {
		b.s.hub.Publish(backend.Wake{Queue: p.Queue})
	}
	return nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	b.s.mu.Lock()
	out := make([]backend.PausedQueue, 0, len(b.s.paused))
	for q, since := range b.s.paused {
		out = append(out, backend.PausedQueue{Queue: q, Since: since})
	}
	b.s.mu.Unlock()
	slices.SortFunc(out, func(a, b backend.PausedQueue) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}
