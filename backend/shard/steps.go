package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

// A job's steps, waits and signals live on its shard: each call goes to
// the shard of the job's id, in the shard's transaction when a caller's
// transaction is given.

// StepRecord records the step on the job's shard.
func (b *Backend) StepRecord(ctx context.Context, p *backend.StepRecordParams) (bool, error) {
	s, local, ok := b.split(p.Lease.ID)
	if !ok {
		return false, nil
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	q := *p
	q.Tx, q.Lease.ID = tx, local
	ok, err = b.shards[s].StepRecord(ctx, &q)
	if err != nil {
		return false, rewriteIDs(err, local, p.Lease.ID)
	}
	return ok, nil
}

// JobWait parks the job on its shard.
func (b *Backend) JobWait(ctx context.Context, p *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	s, local, ok := b.split(p.Lease.ID)
	if !ok {
		return &backend.JobWaitResult{}, nil
	}
	q := *p
	q.Lease.ID = local
	res, err := b.shards[s].JobWait(ctx, &q)
	if err != nil {
		return nil, rewriteIDs(err, local, p.Lease.ID)
	}
	return res, nil
}

// JobSignal signals the job on its shard.
func (b *Backend) JobSignal(ctx context.Context, p *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	s, local, err := b.onShard("signal", p.JobID)
	if err != nil {
		return nil, err
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	q := *p
	q.Tx, q.JobID = tx, local
	res, err := b.shards[s].JobSignal(ctx, &q)
	if err != nil {
		return nil, rewriteIDs(err, local, p.JobID)
	}
	return res, nil
}

// JobDurable reads the job's steps and signals from its shard.
func (b *Backend) JobDurable(ctx context.Context, id int64) (*backend.JobDurable, error) {
	s, local, ok := b.split(id)
	if !ok {
		return &backend.JobDurable{Steps: []backend.StepRow{}, Signals: []backend.SignalRow{}}, nil
	}
	d, err := b.shards[s].JobDurable(ctx, local)
	if err != nil {
		return nil, rewriteIDs(err, local, id)
	}
	for i := range d.Steps {
		d.Steps[i].JobID = id
	}
	for i := range d.Signals {
		d.Signals[i].JobID = id
	}
	return d, nil
}

// StepRecordMany records each shard's steps in one call to it, the shards
// at once; a shard's failure fails the call (the others may have written
// theirs, which a retry finds as ErrStepRecorded).
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	out := make([]backend.StepRecordResult, len(p.Steps))
	groups := map[int][]int{}
	for i, st := range p.Steps {
		s, _, ok := b.split(st.Lease.ID)
		if !ok {
			continue // no shard holds it: refused
		}
		groups[s] = append(groups[s], i)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for s, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := &backend.StepRecordManyParams{Steps: make([]backend.StepRecordParams, len(idx))}
			for k, i := range idx {
				q.Steps[k] = p.Steps[i]
				_, q.Steps[k].Lease.ID, _ = b.split(p.Steps[i].Lease.ID)
			}
			res, err := b.shards[s].StepRecordMany(ctx, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", s, err))
				return
			}
			for k, i := range idx {
				out[i] = res[k]
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("record steps: %w", errors.Join(errs...))
	}
	return out, nil
}
