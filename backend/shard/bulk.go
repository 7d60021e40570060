package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/spoolq/spool/backend"
)

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
