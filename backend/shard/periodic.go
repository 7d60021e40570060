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

// PeriodicRecord records the periodic jobs on every shard, as leadership
// is held on every shard (LeaderElect), and answers from those that
// answered: each job as the lowest-numbered of them holds it (so its
// StartedAt is the one that shard's write kept, the same for every client
// that reaches that shard), with the earliest Since and the latest
// LastSlot of them all (a shard that missed the first record does not move
// Since later). It fails only when every shard failed, so that the leader
// of the shards that can be reached goes on firing.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	got := make([][]backend.PeriodicJob, len(b.shards))
	failed, err := b.partial(b.all, func(s int) error {
		jobs, err := b.shards[s].PeriodicRecord(ctx, p)
		got[s] = jobs
		return err
	})
	var out []backend.PeriodicJob
	for _, s := range b.all {
		if slices.Contains(failed, s) || len(got[s]) != len(p.Jobs) {
			continue
		}
		if out == nil {
			out = slices.Clone(got[s])
			continue
		}
		for i, j := range got[s] {
			if j.Since.Before(out[i].Since) {
				out[i].Since = j.Since
			}
			if j.LastSlot.After(out[i].LastSlot) {
				out[i].LastSlot = j.LastSlot
			}
		}
	}
	if out == nil {
		if err == nil {
			err = fmt.Errorf("no shard answered for each job")
		}
		return nil, fmt.Errorf("record periodic jobs: %w", err)
	}
	return out, nil
}

// PeriodicList lists the periodic jobs recorded on any shard: each as the
// shard that saw it last holds it, with the earliest Since, the latest
// LastSlot and the latest StartedAt of them all.
func (b *Backend) PeriodicList(ctx context.Context) ([]backend.PeriodicJob, error) {
	var mu sync.Mutex
	byName := map[string]backend.PeriodicJob{}
	err := b.each(func(_ int, be backend.Backend) error {
		jobs, err := be.PeriodicList(ctx)
		mu.Lock()
		defer mu.Unlock()
		for _, j := range jobs {
			have, ok := byName[j.Name]
			if !ok {
				byName[j.Name] = j
				continue
			}
			merged := have
			if j.SeenAt.After(have.SeenAt) {
				merged = j
			}
			merged.Since = minTime(have.Since, j.Since)
			merged.LastSlot = maxTime(have.LastSlot, j.LastSlot)
			merged.StartedAt = maxTime(have.StartedAt, j.StartedAt)
			byName[j.Name] = merged
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	out := make([]backend.PeriodicJob, 0, len(byName))
	for _, j := range byName {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, c backend.PeriodicJob) int { return cmp.Compare(a.Name, c.Name) })
	return out, nil
}

// minTime is the earlier of a and c, a zero time counting as none.
func minTime(a, c time.Time) time.Time {
	if a.IsZero() || (!c.IsZero() && c.Before(a)) {
		return c
	}
	return a
}

// maxTime is the later of a and c.
func maxTime(a, c time.Time) time.Time {
	if c.After(a) {
		return c
	}
	return a
}
