package shard

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/spoolq/spool/backend"
)

// rotate returns the next shard of a round-robin counter.
func (b *Backend) rotate(c *atomic.Uint64) int { return int((c.Add(1) - 1) % uint64(len(b.shards))) }

// shardErr is one shard's failure.
type shardErr struct {
	shard int
	err   error
}

// joinShardErrors joins the shards' failures, each naming its shard. The
// result matches backend.ErrNotWritten only when nothing can have been
// written: every shard of the call failed so, and none committed. Else a
// retry of the whole call could repeat what committed, so the failures
// that were not written lose that mark (those of unknown outcome keep
// theirs).
func joinShardErrors(failed []shardErr, committed bool) error {
	keep := !committed
	for _, f := range failed {
		keep = keep && errors.Is(f.err, backend.ErrNotWritten)
	}
	out := make([]error, len(failed))
	for i, f := range failed {
		if !keep && errors.Is(f.err, backend.ErrNotWritten) {
			out[i] = fmt.Errorf("shard %d: %s", f.shard, f.err.Error())
		} else {
			out[i] = fmt.Errorf("shard %d: %w", f.shard, f.err)
		}
	}
	return errors.Join(out...)
}

// byShard groups items by the shard of their job id, keeping their order,
// and returns the shards in order of first appearance. Ids no shard holds
// are returned apart.
func byShard[T any](b *Backend, items []T, id func(T) int64, local func(T, int64) T) (groups map[int][]T, order []int, foreign []T) {
	groups = map[int][]T{}
	for _, it := range items {
		s, l, ok := b.split(id(it))
		if !ok {
			foreign = append(foreign, it)
			continue
		}
		if _, seen := groups[s]; !seen {
			order = append(order, s)
		}
		groups[s] = append(groups[s], local(it, l))
	}
	return groups, order, foreign
}

// partial runs f for each of shards, at once when there are several, and
// returns the shards that failed and their failures joined
// (joinShardErrors).
func (b *Backend) partial(shards []int, f func(s int) error) ([]int, error) {
	errs := make([]error, len(shards))
	if len(shards) == 1 {
		errs[0] = f(shards[0])
	} else {
		var wg sync.WaitGroup
		for k, s := range shards {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = f(s) }()
		}
		wg.Wait()
	}
	var failed []shardErr
	var out []int
	for k, err := range errs {
		if err != nil {
			failed = append(failed, shardErr{shards[k], err})
			out = append(out, shards[k])
		}
	}
	if len(failed) == 0 {
		return nil, nil
	}
	return out, joinShardErrors(failed, len(failed) < len(shards))
}

// some runs f for each of shards, at once when there are several, and
// returns their failures joined by joinShardErrors: a shard that did not
// fail is taken to have committed.
func (b *Backend) some(shards []int, f func(s int) error) error {
	_, err := b.partial(shards, f)
	return err
}
