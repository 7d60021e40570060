package shard

import (
	"context"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

func localFinish(f backend.JobFinish, l int64) backend.JobFinish {
	f.Lease.ID = l
	return f
}

// JobFinishMany writes each shard's outcomes in one call to it, the shards
// at once; with a transaction, every job must be on the transaction's shard.
// A shard's failure is reported in Unwritten (its outcomes) and Err, never
// as the call's error (except in a caller's transaction), even when every
// shard of the call failed: the caller retries those outcomes later, and
// goes on writing other shards' meanwhile.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	groups, order, foreign := byShard(b, p.Finishes, func(f backend.JobFinish) int64 { return f.Lease.ID }, localFinish)
	out := &backend.JobFinishManyResult{}
	for _, f := range foreign {
		out.Rejected = append(out.Rejected, f.Lease)
	}
	if p.Tx != nil && len(order) > 1 {
		return nil, fmt.Errorf("finish jobs: %w: the jobs are on %d shards, a transaction is on one", ErrWrongShard, len(order))
	}
	var mu sync.Mutex
	failed, err := b.partial(order, func(s int) error {
		tx, err := b.txOn(ctx, p.Tx, s)
		if err != nil {
			return err
		}
		res, err := b.shards[s].JobFinishMany(ctx, &backend.JobFinishManyParams{Tx: tx, Finishes: groups[s], DeleteCompleted: p.DeleteCompleted})
		if err == nil {
			err = res.Incomplete() // a shard that is itself sharded
		}
		if err != nil {
			return err
		}
		mu.Lock()
		for _, l := range res.Rejected {
			out.Rejected = append(out.Rejected, globalLease(l, s))
		}
		mu.Unlock()
		return nil
	})
	if p.Tx != nil && err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	for _, s := range failed {
		for _, f := range groups[s] {
			out.Unwritten = append(out.Unwritten, globalLease(f.Lease, s))
		}
	}
	if err != nil {
		out.Err = fmt.Errorf("finish jobs: %w", err)
	}
	return out, nil
}
