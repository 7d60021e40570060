package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
