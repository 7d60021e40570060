package shard

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// JobClaim claims from the queue's shard under ByQueue; when that leaves
// part of the claim unfilled, it also looks on the other shards for strays
// (at most every strayLookEvery per queue, and at every claim while it
// finds some). Under ByKey it asks the shards in turn, starting one further
// at each call, until it has Max jobs, so that no shard is starved.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	home := b.QueueShard(p.Queue)
	if home < 0 {
		return b.claimFrom(ctx, p, b.rotation())
	}
	rows, err := b.shards[home].JobClaim(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("shard %d: %w", home, err)
	}
	rows = globalRows(rows, home)
	if len(rows) >= p.Max || !b.strays.due(p.Queue) {
		return rows, nil
	}
	q := *p
	q.Max = p.Max - len(rows)
	// A shard that cannot be reached delays its strays to the next look,
	// never the queue's own jobs.
	more, _ := b.claimFrom(ctx, &q, b.others(home))
	b.strays.looked(p.Queue, len(more) > 0)
	return append(rows, more...), nil
}

// others lists every shard but s.
func (b *Backend) others(s int) []int {
	out := make([]int, 0, len(b.shards)-1)
	for i := range b.shards {
		if i != s {
			out = append(out, i)
		}
	}
	return out
}

// claimFrom claims up to p.Max jobs from the shards in order. A shard that
// fails is passed over, so that one unreachable shard does not stop the
// others' work; its claim, if it committed, is released (or, while the
// shard cannot be reached, rescued when its leases end). Only when every
// shard failed does the claim fail.
func (b *Backend) claimFrom(ctx context.Context, p *backend.JobClaimParams, order []int) ([]*backend.JobRow, error) {
	var (
		out    []*backend.JobRow
		failed []shardErr
	)
	for _, s := range order {
		q := *p
		q.Max = p.Max - len(out)
		rows, err := b.shards[s].JobClaim(ctx, &q)
		if err != nil {
			if ctx.Err() != nil && len(out) == 0 {
				return nil, fmt.Errorf("shard %d: %w", s, err)
			} else if ctx.Err() != nil {
				return out, nil
			}
			failed = append(failed, shardErr{s, err})
			_, _ = b.shards[s].JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: p.ClaimID})
			continue
		}
		out = append(out, globalRows(rows, s)...)
		if len(out) >= p.Max {
			break
		}
	}
	if len(out) == 0 && len(failed) == len(order) && len(failed) > 0 {
		return nil, joinShardErrors(failed, false)
	}
	return out, nil
}

// JobReleaseClaim releases the claim's jobs on every shard.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	var total sumInt
	err := b.each(func(_ int, be backend.Backend) error {
		n, err := be.JobReleaseClaim(ctx, p)
		total.add(n)
		return err
	})
	if err != nil {
		return total.get(), fmt.Errorf("release claim: %w", err)
	}
	return total.get(), nil
}
