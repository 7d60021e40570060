package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// PartialInsertError reports an insert spread over several shards that
// failed on some after others had committed: the jobs at Committed (indexes
// of the input, in order) were written, with the ids in IDs (nil when the
// call asked for none), and Err is what failed. Inserting the rest again
// writes each job once; inserting the whole call again duplicates the
// committed ones (unless they are unique).
type PartialInsertError struct {
	Committed []int
	IDs       []int64
	Err       error
}

func (e *PartialInsertError) Error() string {
	return fmt.Sprintf("insert over shards: %d jobs committed, then: %v", len(e.Committed), e.Err)
}

func (e *PartialInsertError) Unwrap() error { return e.Err }

// place returns each job's shard, all the same one when the call has a
// transaction. Nothing is written.
func (b *Backend) place(p *backend.JobInsertManyParams) ([]int, error) {
	fixed := -1
	if p.Tx != nil {
		s, err := txShard(p.Tx)
		if err != nil {
			return nil, err
		}
		fixed = s
	}
	out := make([]int, len(p.Jobs))
	for i, j := range p.Jobs {
		if b.opts.Placement == ByQueue {
			out[i] = b.QueueShard(j.Queue)
		} else if key := b.opts.KeyOf(j); key != "" {
			out[i] = b.KeyShard(key)
		} else {
			out[i] = -1
		}
		if p.Tx != nil && fixed < 0 {
			fixed = out[i]
		}
	}
	if p.Tx != nil && fixed < 0 {
		fixed = b.rotate(&b.inserts)
	}
	for i, s := range out {
		switch {
		case s < 0 && fixed >= 0:
			out[i] = fixed
		case s < 0:
			out[i] = b.rotate(&b.inserts)
		case fixed >= 0 && s != fixed:
			return nil, fmt.Errorf("%w: job %d of the call belongs on shard %d, the transaction is on shard %d", ErrWrongShard, i, s, fixed)
		}
	}
	return out, nil
}

// rotate returns the next shard of a round-robin counter.
func (b *Backend) rotate(c *atomic.Uint64) int { return int((c.Add(1) - 1) % uint64(len(b.shards))) }

// JobInsertMany inserts each job on its shard: with a transaction, all on
// the transaction's shard or none (ErrWrongShard); without one, a shard's
// jobs in one call to it, the shards at once. A failure after some shards
// committed is a *PartialInsertError.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	placed, err := b.place(p)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	groups := map[int][]int{}
	var order []int
	for i, s := range placed {
		if _, ok := groups[s]; !ok {
			order = append(order, s)
		}
		groups[s] = append(groups[s], i)
	}
	noIDs := p.NoIDs && !backend.AnyUnique(p.Jobs)
	out := &backend.JobInsertManyResult{}
	if !noIDs {
		out.IDs = make([]int64, len(p.Jobs))
	}
	if len(order) == 0 {
		return out, nil
	}
	results := make([]*backend.JobInsertManyResult, len(order))
	errs := make([]error, len(order))
	insert := func(k int) {
		s := order[k]
		idx := groups[s]
		tx, err := b.txOn(ctx, p.Tx, s)
		if err != nil {
			errs[k] = err
			return
		}
		jobs := p.Jobs
		if len(idx) != len(p.Jobs) {
			jobs = make([]*backend.JobInsertParams, len(idx))
			for n, i := range idx {
				jobs[n] = p.Jobs[i]
			}
		}
		results[k], errs[k] = b.shards[s].JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: jobs, NoIDs: noIDs})
	}
	if len(order) == 1 {
		insert(0)
	} else {
		var wg sync.WaitGroup
		for k := range order {
			wg.Add(1)
			go func() { defer wg.Done(); insert(k) }()
		}
		wg.Wait()
	}
	var failed []shardErr
	var committed []int
	for k, s := range order {
		if errs[k] != nil {
			failed = append(failed, shardErr{s, errs[k]})
			continue
		}
		r := results[k]
		out.Count += r.Count
		for n, i := range groups[s] {
			committed = append(committed, i)
			if out.IDs != nil && n < len(r.IDs) {
				out.IDs[i] = global(r.IDs[n], s)
			}
			if n < len(r.Duplicates) && r.Duplicates[n] {
				if out.Duplicates == nil {
					out.Duplicates = make([]bool, len(p.Jobs))
				}
				out.Duplicates[i] = true
			}
		}
	}
	if len(failed) == 0 {
		return out, nil
	}
	err = fmt.Errorf("insert jobs: %w", joinShardErrors(failed, len(committed) > 0))
	if len(committed) == 0 {
		return nil, err
	}
	slices.Sort(committed)
	pe := &PartialInsertError{Committed: committed, Err: err}
	if out.IDs != nil {
		for _, i := range committed {
			pe.IDs = append(pe.IDs, out.IDs[i])
		}
	}
	return nil, pe
}

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

var _ backend.Backend = (*Backend)(nil)
