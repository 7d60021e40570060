package shard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// localAfter is the local id bound on shard s equivalent to "global id >
// after": 0 (no bound) for after 0.
func localAfter(after int64, s int) int64 {
	if after <= 0 {
		return 0
	}
	return max(floorDiv(after-int64(s), MaxShards), 0)
}

// localBefore is the local id bound on shard s equivalent to "global id <
// before", and false when no job of the shard can be below it.
func localBefore(before int64, s int) (int64, bool) {
	if before <= 0 {
		return 0, true
	}
	l := -floorDiv(-(before - int64(s)), MaxShards) // ceil((before-s)/256)
	return l, l > 1
}

// JobList lists each shard that can hold the jobs with cursors of its own
// and merges them by id. With a transaction, its shard is listed through it
// (seeing its uncommitted inserts) and the others through their pools.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	limit := p.LimitOrDefault()
	shards := b.all
	lists := make([][]*backend.JobRow, len(b.shards))
	err := b.some(shards, func(s int) error {
		q := *p
		q.Limit = limit
		q.AfterID = localAfter(p.AfterID, s)
		before, any := localBefore(p.BeforeID, s)
		if !any {
			return nil
		}
		q.BeforeID = before
		q.Tx = nil
		if p.Tx != nil {
			ts, err := txShard(p.Tx)
			if err != nil {
				return err
			}
			if ts == s {
				if q.Tx, err = b.txOn(ctx, p.Tx, s); err != nil {
					return err
				}
			}
		}
		rows, err := b.shards[s].JobList(ctx, &q)
		lists[s] = globalRows(rows, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var out []*backend.JobRow
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortFunc(out, func(a, c *backend.JobRow) int {
		if p.Newest {
			return cmp.Compare(c.ID, a.ID)
		}
		return cmp.Compare(a.ID, c.ID)
	})
	return out[:min(len(out), limit)], nil
}

// JobThroughput adds up the shards' buckets.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	var mu sync.Mutex
	sum := map[time.Time]*backend.ThroughputBucket{}
	err := b.some(b.all, func(s int) error {
		buckets, err := b.shards[s].JobThroughput(ctx, p)
		mu.Lock()
		defer mu.Unlock()
		for _, x := range buckets {
			t := sum[x.Start]
			if t == nil {
				t = &backend.ThroughputBucket{Start: x.Start}
				sum[x.Start] = t
			}
			t.Completed += x.Completed
			t.Discarded += x.Discarded
			t.Cancelled += x.Cancelled
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	out := make([]backend.ThroughputBucket, 0, len(sum))
	for _, x := range sum {
		out = append(out, *x)
	}
	slices.SortFunc(out, func(a, c backend.ThroughputBucket) int { return a.Start.Compare(c.Start) })
	return out, nil
}

// QueueStatsAll adds up the shards' counts, queue by queue.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	var mu sync.Mutex
	sum := map[string]map[backend.State]int64{}
	err := b.each(func(_ int, be backend.Backend) error {
		stats, err := be.QueueStatsAll(ctx)
		mu.Lock()
		defer mu.Unlock()
		for _, q := range stats {
			m := sum[q.Queue]
			if m == nil {
				m = map[backend.State]int64{}
				sum[q.Queue] = m
			}
			for st, n := range q.Counts {
				m[st] += n
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	out := make([]backend.QueueStats, 0, len(sum))
	for q, m := range sum {
		out = append(out, backend.QueueStats{Queue: q, Counts: m})
	}
	slices.SortFunc(out, func(a, c backend.QueueStats) int { return cmp.Compare(a.Queue, c.Queue) })
	return out, nil
}

// QueuePause pauses or resumes the queue on every shard, so that claims on
// any shard see it (under ByKey a queue spans them all). A failure leaves
// some shards changed; calling again finishes the change.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	if err := b.each(func(_ int, be backend.Backend) error { return be.QueuePause(ctx, p) }); err != nil {
		return fmt.Errorf("%s queue %s: %w", p.Op(), p.Queue, err)
	}
	return nil
}

// QueuePausedAll lists the queues paused on any shard, each with the
// earliest time it was paused.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	var mu sync.Mutex
	since := map[string]time.Time{}
	err := b.each(func(_ int, be backend.Backend) error {
		qs, err := be.QueuePausedAll(ctx)
		mu.Lock()
		defer mu.Unlock()
		for _, q := range qs {
			if t, ok := since[q.Queue]; !ok || q.Since.Before(t) {
				since[q.Queue] = q.Since
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("paused queues: %w", err)
	}
	out := make([]backend.PausedQueue, 0, len(since))
	for q, t := range since {
		out = append(out, backend.PausedQueue{Queue: q, Since: t})
	}
	slices.SortFunc(out, func(a, c backend.PausedQueue) int { return cmp.Compare(a.Queue, c.Queue) })
	return out, nil
}

// byID runs a one-job operation on the job's shard and gives the row back
// its global id.
func (b *Backend) byID(op string, id int64, f func(be backend.Backend, local int64) (*backend.JobRow, error)) (*backend.JobRow, error) {
	s, local, err := b.onShard(op, id)
	if err != nil {
		return nil, err
	}
	row, err := f(b.shards[s], local)
	if err != nil {
		return nil, rewriteIDs(err, local, id)
	}
	return globalRow(row, s), nil
}

// rewriteIDs keeps the error's type (errors.Is still matches) and the
// shard's message, in which the job is named by its local id; the message
// is prefixed with the global id.
func rewriteIDs(err error, local, id int64) error {
	return fmt.Errorf("job %d (id %d on its shard): %w", id, local, err)
}

// JobGet reads the job from its shard.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	return b.byID("get", id, func(be backend.Backend, l int64) (*backend.JobRow, error) { return be.JobGet(ctx, l) })
}

// JobRetry retries the job on its shard.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	return b.byID("retry", p.ID, func(be backend.Backend, l int64) (*backend.JobRow, error) {
		return be.JobRetry(ctx, &backend.JobRetryParams{ID: l})
	})
}

// JobCancel cancels the job on its shard.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	return b.byID("cancel", p.ID, func(be backend.Backend, l int64) (*backend.JobRow, error) {
		return be.JobCancel(ctx, &backend.JobCancelParams{ID: l})
	})
}

// JobDelete deletes the job on its shard.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	return b.byID("delete", p.ID, func(be backend.Backend, l int64) (*backend.JobRow, error) {
		return be.JobDelete(ctx, &backend.JobDeleteParams{ID: l})
	})
}
