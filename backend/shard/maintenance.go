package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobRescue rescues on every shard, up to Max on each.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	var mu sync.Mutex
	out := &backend.JobRescueResult{}
	failed, err := b.partial(b.all, func(s int) error {
		r, err := b.shards[s].JobRescue(ctx, p)
		if r != nil {
			mu.Lock()
			out.Retried += r.Retried
			out.Discarded += r.Discarded
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return out, fmt.Errorf("rescue: %s: %w", b.othersDone(failed, fmt.Sprintf("%d retried, %d discarded", out.Retried, out.Discarded)), err)
	}
	return out, nil
}

// othersDone says, for the error of a call to every shard, how many failed
// and what the others did: a leader's warning that rescue or cleanup
// failed is about those shards alone.
func (b *Backend) othersDone(failed []int, did string) string {
	if len(failed) == len(b.shards) {
		return "every shard failed"
	}
	return fmt.Sprintf("%d of %d shards failed, the others done (%s)", len(failed), len(b.shards), did)
}

// JobCleanup cleans every shard, up to Max on each, and reports the total
// deleted. A sum of Max or more makes the caller call again, which finds
// what the full shards had left.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	var total sumInt
	failed, err := b.partial(b.all, func(s int) error {
		n, err := b.shards[s].JobCleanup(ctx, p)
		total.add(n)
		return err
	})
	if err != nil {
		return total.get(), fmt.Errorf("cleanup: %s: %w", b.othersDone(failed, fmt.Sprintf("%d deleted", total.get())), err)
	}
	return total.get(), nil
}

// sumInt is a counter added to from several goroutines.
type sumInt struct {
	mu sync.Mutex
	n  int
}

func (s *sumInt) add(n int) { s.mu.Lock(); s.n += n; s.mu.Unlock() }
func (s *sumInt) get() int  { s.mu.Lock(); defer s.mu.Unlock(); return s.n }

// LeaderElect runs the election on every shard at once, and the client
// leads the whole backend when it leads the lowest-numbered shard whose
// election answered. Every client of the backend takes part on every
// shard, so each shard's election has a live holder, and when shard 0
// cannot be reached, the holder of shard 1 leads at once (rescue, cleanup
// and periodic jobs go on for the shards that can be reached), without
// waiting for a term to end; when shard 0 is back, its holder leads again.
// An election that takes longer than half the term counts as not
// answered, so that a shard that hangs does not hold up the others'.
//
// Two clients lead at once only when they disagree on which shard is the
// lowest that answers (one reaches shard 0, the other does not) or for a
// moment as that changes: what the leader does is safe done twice, as it
// is when a leader stalls past its term. Rescue and cleanup are conditional
// updates and deletes, and a periodic slot's job has a unique key on the
// shard that its queue (or key) places it on, the same shard for every
// client, so two firings of a slot make one job.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	won := make([]bool, len(b.shards))
	ectx, cancel := context.WithTimeout(ctx, max(p.TTL/2, time.Second))
	defer cancel()
	failed, err := b.partial(b.all, func(s int) error {
		ok, err := b.shards[s].LeaderElect(ectx, p)
		won[s] = ok
		return err
	})
	if ctx.Err() != nil {
		return false, fmt.Errorf("leader election: %w", ctx.Err())
	}
	for _, s := range b.all {
		if !slices.Contains(failed, s) {
			return won[s], nil
		}
	}
	return false, fmt.Errorf("leader election: %w", err)
}

// LeaderResign resigns on every shard: the client may hold any of them.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if err := b.each(func(_ int, be backend.Backend) error { return be.LeaderResign(ctx, p) }); err != nil {
		return fmt.Errorf("resign leadership: %w", err)
	}
	return nil
}
