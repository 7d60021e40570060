package shard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/spoolq/spool/backend"
)

// JobInsertDebounced inserts on the key's shard: under ByKey the shard of
// the debounced key itself (never the job's flow key, which may differ
// between inserts of one key), under ByQueue the queue's shard, so all
// inserts of one key (and queue) meet on one store, which serialises them.
// With a transaction, the key must belong on its shard (ErrWrongShard).
func (b *Backend) JobInsertDebounced(ctx context.Context, p *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	s := b.KeyShard(p.Key)
	if b.opts.Placement == ByQueue {
		s = b.QueueShard(p.Job.Queue)
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	q := *p
	q.Tx = tx
	res, err := b.shards[s].JobInsertDebounced(ctx, &q)
	if err != nil {
		return nil, err
	}
	out := *res
	out.ID = global(res.ID, s)
	return &out, nil
}

// JobFinishedSince merges the shards' lists; a shard that fails fails the
// call.
func (b *Backend) JobFinishedSince(ctx context.Context, p *backend.JobFinishedSinceParams) ([]*backend.FinishedJob, error) {
	var mu sync.Mutex
	var out []*backend.FinishedJob
	err := b.some(b.all, func(s int) error {
		// The shard's jobs after (Since, AfterID) in global id order: a
		// global id is local*MaxShards + s.
		q := *p
		q.AfterID = 0
		if p.AfterID >= int64(s) {
			q.AfterID = (p.AfterID - int64(s)) / MaxShards
		}
		jobs, err := b.shards[s].JobFinishedSince(ctx, &q)
		mu.Lock()
		defer mu.Unlock()
		for _, j := range jobs {
			j.ID = global(j.ID, s)
			out = append(out, j)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	slices.SortFunc(out, func(a, c *backend.FinishedJob) int {
		if n := a.FinalizedAt.Compare(c.FinalizedAt); n != 0 {
			return n
		}
		return cmp.Compare(a.ID, c.ID)
	})
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ListenFinished listens on every shard that is a backend.FinishNotifier,
// reporting their ids as global ones; it is ready once all are, and ends
// with the first that ends. With no such shard it returns ErrNoWakeUps.
func (b *Backend) ListenFinished(ctx context.Context, ready func(), onFinish func(ids []int64)) error {
	var shards []int
	for s, be := range b.shards {
		if _, ok := be.(backend.FinishNotifier); ok {
			shards = append(shards, s)
		}
	}
	if len(shards) == 0 {
		return fmt.Errorf("listen for finished jobs: no shard notifies: %w", backend.ErrNoWakeUps)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var readyWG sync.WaitGroup
	readyWG.Add(len(shards))
	errs := make(chan error, len(shards))
	for _, s := range shards {
		n := b.shards[s].(backend.FinishNotifier)
		go func() {
			var once sync.Once
			errs <- n.ListenFinished(ctx, func() { once.Do(readyWG.Done) }, func(ids []int64) {
				if ids == nil {
					onFinish(nil)
					return
				}
				g := make([]int64, len(ids))
				for i, id := range ids {
					g[i] = global(id, s)
				}
				onFinish(g)
			})
			once.Do(readyWG.Done)
		}()
	}
	go func() {
		readyWG.Wait()
		if ctx.Err() == nil {
			ready()
		}
	}()
	err := <-errs
	cancel()
	return err
}

// AnnounceFinished announces each shard's ids on that shard, where it is
// a backend.FinishAnnouncer.
func (b *Backend) AnnounceFinished(ctx context.Context, ids []int64) error {
	byShard := map[int][]int64{}
	for _, id := range ids {
		if s, local, ok := b.split(id); ok {
			byShard[s] = append(byShard[s], local)
		}
	}
	var first error
	for s, local := range byShard {
		if a, ok := b.shards[s].(backend.FinishAnnouncer); ok {
			if err := a.AnnounceFinished(ctx, local); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
