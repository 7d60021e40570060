package shard

import (
	"context"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

// JobHeartbeatMany extends each shard's leases in one call to it. A shard's
// failure is reported in Unextended (its leases) and Err, never as the
// call's error.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	groups, order, foreign := byShard(b, p.Leases, func(l backend.LeaseRef) int64 { return l.ID },
		func(l backend.LeaseRef, id int64) backend.LeaseRef { l.ID = id; return l })
	out := &backend.JobHeartbeatManyResult{Lost: foreign}
	var mu sync.Mutex
	failed, err := b.partial(order, func(s int) error {
		res, err := b.shards[s].JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: groups[s], Lease: p.Lease})
		if err == nil {
			err = res.Incomplete()
		}
		if err != nil {
			return err
		}
		mu.Lock()
		for _, l := range res.Lost {
			out.Lost = append(out.Lost, globalLease(l, s))
		}
		mu.Unlock()
		return nil
	})
	for _, s := range failed {
		for _, l := range groups[s] {
			out.Unextended = append(out.Unextended, globalLease(l, s))
		}
	}
	if err != nil {
		out.Err = fmt.Errorf("heartbeat: %w", err)
	}
	return out, nil
}

// JobRecord writes on the job's shard.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	s, local, ok := b.split(p.Lease.ID)
	if !ok {
		return false, nil
	}
	q := *p
	q.Lease.ID = local
	return b.shards[s].JobRecord(ctx, &q)
}
