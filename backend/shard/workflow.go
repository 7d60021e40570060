package shard

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// A workflow, and a batch with its callbacks, live on one shard: the
// transaction that finishes a task makes its dependents available, and one
// database's transaction cannot reach another's rows. The shard is the
// caller transaction's, or the one the first job's queue (or key) places
// it on. Workflow and batch ids carry their shard as job ids do.

// placeGroup returns the shard of a group of jobs that must stay together.
func (b *Backend) placeGroup(tx backend.Tx, first *backend.JobInsertParams) (int, error) {
	p := &backend.JobInsertManyParams{Tx: tx}
	if first != nil {
		p.Jobs = []*backend.JobInsertParams{first}
	}
	if len(p.Jobs) == 0 {
		if tx != nil {
			if s, err := txShard(tx); err != nil || s >= 0 {
				return s, err
			}
		}
		return b.rotate(&b.inserts), nil
	}
	placed, err := b.place(p)
	if err != nil {
		return 0, err
	}
	return placed[0], nil
}

func globalIDs(ids []int64, s int) []int64 {
	for i, id := range ids {
		ids[i] = global(id, s)
	}
	return ids
}

// WorkflowInsert inserts the workflow on one shard.
func (b *Backend) WorkflowInsert(ctx context.Context, p *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	var first *backend.JobInsertParams
	if len(p.Tasks) > 0 {
		first = p.Tasks[0].Job
	}
	s, err := b.placeGroup(p.Tx, first)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	q := *p
	q.Tx = tx
	res, err := b.shards[s].WorkflowInsert(ctx, &q)
	if err != nil {
		return nil, err
	}
	res.ID = global(res.ID, s)
	globalIDs(res.IDs, s)
	return res, nil
}

func globalDetail(d *backend.WorkflowDetail, s int) *backend.WorkflowDetail {
	d.ID = global(d.ID, s)
	globalRows(d.Jobs, s)
	for i := range d.Edges {
		d.Edges[i].Parent = global(d.Edges[i].Parent, s)
		d.Edges[i].Child = global(d.Edges[i].Child, s)
	}
	return d
}

// WorkflowGet reads the workflow from its shard.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.WorkflowDetail, error) {
	s, local, ok := b.split(id)
	if !ok {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	d, err := b.shards[s].WorkflowGet(ctx, local)
	if err != nil {
		return nil, fmt.Errorf("workflow %d: %w", id, err)
	}
	return globalDetail(d, s), nil
}

// WorkflowList merges every shard's listing, newest (highest global id)
// first.
func (b *Backend) WorkflowList(ctx context.Context, p *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	out, err := newestAcross(b, p.BeforeID, p.Limit, func(s int, before int64) ([]*backend.WorkflowSummary, error) {
		q := *p
		q.BeforeID = before
		ws, err := b.shards[s].WorkflowList(ctx, &q)
		for _, w := range ws {
			w.ID = global(w.ID, s)
		}
		return ws, err
	}, func(w *backend.WorkflowSummary) int64 { return w.ID })
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowCancel cancels the workflow on its shard.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	return b.onWorkflowShard("cancel", id, func(be backend.Backend, local int64) (int, error) { return be.WorkflowCancel(ctx, local) })
}

// WorkflowRetry retries the workflow on its shard.
func (b *Backend) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	return b.onWorkflowShard("retry", id, func(be backend.Backend, local int64) (int, error) { return be.WorkflowRetry(ctx, local) })
}

// onWorkflowShard runs a change of workflow id on its shard, with the id
// the shard knows it by.
func (b *Backend) onWorkflowShard(op string, id int64, fn func(be backend.Backend, local int64) (int, error)) (int, error) {
	s, local, ok := b.split(id)
	if !ok {
		return 0, fmt.Errorf("%s workflow %d: %w", op, id, backend.ErrWorkflowNotFound)
	}
	n, err := fn(b.shards[s], local)
	if err != nil {
		return 0, fmt.Errorf("workflow %d: %w", id, err)
	}
	return n, nil
}

// JobDependencies reads a job's dependencies on its shard.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	s, local, err := b.onShard("read dependencies of", id)
	if err != nil {
		return nil, err
	}
	deps, err := b.shards[s].JobDependencies(ctx, local)
	if err != nil {
		return nil, rewriteIDs(err, local, id)
	}
	for i := range deps {
		deps[i].JobID = global(deps[i].JobID, s)
	}
	return deps, nil
}

func globalBatch(bt *backend.Batch, s int) *backend.Batch {
	bt.ID = global(bt.ID, s)
	for _, id := range []*int64{&bt.OnSuccess, &bt.OnFailure, &bt.OnComplete} {
		if *id != 0 {
			*id = global(*id, s)
		}
	}
	return bt
}

// BatchInsert inserts the batch, its members and callbacks on one shard.
func (b *Backend) BatchInsert(ctx context.Context, p *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	// The first member, else the first callback, places the batch: an
	// open batch's later members most likely share its queue.
	var first *backend.JobInsertParams
	for _, j := range append(slices.Clone(p.Jobs), p.Callbacks.OnSuccess, p.Callbacks.OnFailure, p.Callbacks.OnComplete) {
		if j != nil {
			first = j
			break
		}
	}
	s, err := b.placeGroup(p.Tx, first)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	q := *p
	q.Tx = tx
	res, err := b.shards[s].BatchInsert(ctx, &q)
	if err != nil {
		return nil, err
	}
	res.ID = global(res.ID, s)
	globalIDs(res.IDs, s)
	return res, nil
}

// BatchAdd adds members on the batch's shard.
func (b *Backend) BatchAdd(ctx context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	s, local, ok := b.split(p.ID)
	if !ok {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, backend.ErrBatchNotFound)
	}
	tx, err := b.txOn(ctx, p.Tx, s)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	res, err := b.shards[s].BatchAdd(ctx, &backend.BatchAddParams{Tx: tx, ID: local, Jobs: p.Jobs})
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", p.ID, err)
	}
	globalIDs(res.IDs, s)
	return res, nil
}

// BatchSeal seals the batch on its shard.
func (b *Backend) BatchSeal(ctx context.Context, id int64) (*backend.Batch, error) {
	s, local, ok := b.split(id)
	if !ok {
		return nil, fmt.Errorf("seal batch %d: %w", id, backend.ErrBatchNotFound)
	}
	bt, err := b.shards[s].BatchSeal(ctx, local)
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	return globalBatch(bt, s), nil
}

// BatchGet reads the batch from its shard.
func (b *Backend) BatchGet(ctx context.Context, id int64) (*backend.Batch, error) {
	s, local, ok := b.split(id)
	if !ok {
		return nil, fmt.Errorf("get batch %d: %w", id, backend.ErrBatchNotFound)
	}
	bt, err := b.shards[s].BatchGet(ctx, local)
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", id, err)
	}
	return globalBatch(bt, s), nil
}

// BatchList merges every shard's listing, newest first.
func (b *Backend) BatchList(ctx context.Context, p *backend.BatchListParams) ([]*backend.Batch, error) {
	out, err := newestAcross(b, p.BeforeID, p.Limit, func(s int, before int64) ([]*backend.Batch, error) {
		q := *p
		q.BeforeID = before
		bs, err := b.shards[s].BatchList(ctx, &q)
		for i, bt := range bs {
			bs[i] = globalBatch(bt, s)
		}
		return bs, err
	}, func(bt *backend.Batch) int64 { return bt.ID })
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	return out, nil
}

// newestAcross lists, on every shard that can hold an id below before
// (0: no bound), what fetch returns for the shard and its local bound
// (with global ids), and merges the lists newest (highest id) first, up
// to limit (0: the default).
func newestAcross[T any](b *Backend, before int64, limit int, fetch func(s int, localBefore int64) ([]T, error), id func(T) int64) ([]T, error) {
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	lists := make([][]T, len(b.shards))
	err := b.some(b.all, func(s int) error {
		l, ok := localBefore(before, s)
		if !ok {
			return nil
		}
		got, err := fetch(s, l)
		if err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		lists[s] = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortFunc(out, func(a, c T) int { return cmp.Compare(id(c), id(a)) })
	return out[:min(len(out), limit)], nil
}

// BatchMembers lists the members on the batch's shard.
func (b *Backend) BatchMembers(ctx context.Context, p *backend.BatchMembersParams) ([]*backend.JobRow, error) {
	s, local, ok := b.split(p.ID)
	if !ok {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, backend.ErrBatchNotFound)
	}
	rows, err := b.shards[s].BatchMembers(ctx, &backend.BatchMembersParams{ID: local, AfterID: localAfter(p.AfterID, s), Limit: p.Limit})
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", p.ID, err)
	}
	return globalRows(rows, s), nil
}

var _ backend.WorkflowStore = (*Backend)(nil)
