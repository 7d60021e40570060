package shard

import (
	"context"
	"fmt"

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
