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

// JobBulk applies one batch across the shards in global id order: it lists
// the first Max jobs the batch would take on each shard, keeps the first Max
// of them all, and has each shard act on its share, so that no job past the
// batch's last id is touched (the next batch resumes there).
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	states := p.StatesTaken()
	if len(states) == 0 {
		return &backend.JobBulkResult{}, nil
	}
	limit := p.MaxOrDefault()
	shards := b.all
	listed := make([][]*backend.JobRow, len(b.shards))
	err := b.some(shards, func(s int) error {
		rows, err := b.shards[s].JobList(ctx, &backend.JobListParams{Queue: p.Queue, Kind: p.Kind, States: states,
			AfterID: localAfter(p.AfterID, s), Limit: limit, CreatedAfter: p.CreatedAfter, CreatedBefore: p.CreatedBefore})
		listed[s] = globalRows(rows, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	var all []int64
	for _, rows := range listed {
		for _, j := range rows {
			all = append(all, j.ID)
		}
	}
	slices.Sort(all)
	cut := int64(-1) // every listed job is in the batch
	if len(all) > limit {
		cut = all[limit-1]
	}
	share := make([]int, len(b.shards))
	var act []int
	for _, s := range shards {
		for _, j := range listed[s] {
			if cut < 0 || j.ID <= cut {
				share[s]++
			}
		}
		if share[s] > 0 {
			act = append(act, s)
		}
	}
	out := &backend.JobBulkResult{}
	var mu sync.Mutex
	// short is the lowest last id of a shard that took its share but
	// stopped before its listed last job (jobs changed meanwhile): the
	// next batch resumes there so that none of that shard's is skipped.
	short := int64(-1)
	err = b.some(act, func(s int) error {
		q := *p
		q.AfterID, q.Max = localAfter(p.AfterID, s), share[s]
		r, err := b.shards[s].JobBulk(ctx, &q)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out.Changed += r.Changed
		out.Taken += r.Taken
		last := int64(0)
		if r.LastID > 0 {
			last = global(r.LastID, s)
		}
		out.LastID = max(out.LastID, last)
		if r.Taken == share[s] && last < listed[s][share[s]-1].ID && (short < 0 || last < short) {
			short = last
		}
		for _, id := range r.UniqueRetries {
			out.UniqueRetries = append(out.UniqueRetries, global(id, s))
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	if cut >= 0 {
		out.LastID = cut
		// The batch took Max jobs: the caller goes on.
		out.Taken = max(out.Taken, limit)
	}
	if short >= 0 {
		out.LastID = short
	}
	slices.Sort(out.UniqueRetries)
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

// QueueFlowUse adds up the use of each flow key over the shards.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	var mu sync.Mutex
	uses := backend.FlowUses{}
	q := *p
	// Every key of each shard: a key's use is its sum over the shards, so
	// the busiest overall need not be among any one shard's busiest.
	q.Limit = 1 << 20
	err := b.some(b.all, func(s int) error {
		keys, err := b.shards[s].QueueFlowUse(ctx, &q)
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			uses.Add(k.Key, k.Running, k.Pending)
			if k.RateTAT != nil {
				if x, ok := uses[k.Key]; !ok || x.RateTAT == nil || k.RateTAT.After(*x.RateTAT) {
					uses.SetRate(k.Key, *k.RateTAT)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flow use of queue %s: %w", p.Queue, err)
	}
	return uses.Sorted(p.Limit), nil
}
