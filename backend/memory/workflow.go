package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// workflowRec is a workflow's record: its name, when it was inserted and
// its tasks' job ids.
type workflowRec struct {
	id      int64
	name    string
	created time.Time
	tasks   []int64
}

// WorkflowInsert implements backend.WorkflowStore.
func (b *Backend) WorkflowInsert(ctx context.Context, p *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	for _, tp := range p.Tasks {
		if tp.Job.UniqueKey != "" {
			if _, held := s.holder(tp.Job.UniqueKey); held {
				s.mu.Unlock()
				return nil, fmt.Errorf("insert workflow: task %q: %w", tp.Name, backend.ErrUniqueConflict)
			}
		}
	}
	s.nextWF++
	rec := &workflowRec{id: s.nextWF, name: p.Name, created: t}
	rows := make([]*backend.JobRow, len(p.Tasks))
	res := &backend.WorkflowInsertResult{ID: rec.id, IDs: make([]int64, len(p.Tasks))}
	for i, tp := range p.Tasks {
		s.nextID++
		r := newRow(s.nextID, tp.Job, t)
		r.WorkflowID, r.WorkflowTask = rec.id, tp.Name
		if len(tp.Deps) > 0 {
			r.State, r.WaitKind, r.DepsLeft = backend.StateWaiting, backend.WaitDeps, len(tp.Deps)
		}
		rows[i], res.IDs[i] = r, r.ID
		rec.tasks = append(rec.tasks, r.ID)
		if r.UniqueKey != "" {
			s.unique[r.UniqueKey] = r
			if tx != nil {
				s.inOpenTx[r] = true
			}
		}
	}
	var edges []backend.WorkflowEdge
	for i, tp := range p.Tasks {
		for _, d := range tp.Deps {
			rows[d.Task].HasDependents = true
			edges = append(edges, backend.WorkflowEdge{Parent: rows[d.Task].ID, Child: rows[i].ID, OnFail: d.OnFail})
		}
	}
	commit := func(s *store) {
		s.workflows[rec.id] = rec
		for _, e := range edges {
			s.children[e.Parent] = append(s.children[e.Parent], e)
			s.parents[e.Child] = append(s.parents[e.Child], e)
		}
	}
	var wakes []backend.Wake
	if tx == nil {
		commit(s)
		for _, r := range rows {
			s.jobs[r.ID] = r
		}
		wakes = runnable(rows, t)
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts(rows); err != nil {
			s.mu.Lock()
			s.forgetTxRows(rows)
			s.mu.Unlock()
			return nil, fmt.Errorf("insert workflow: %w", err)
		}
		tx.mu.Lock()
		tx.commits = append(tx.commits, commit)
		tx.mu.Unlock()
	}
	s.hub.Publish(wakes...)
	return res, nil
}

// summary counts a workflow's tasks by state; s.mu is held.
func (s *store) summary(w *workflowRec) *backend.WorkflowSummary {
	out := &backend.WorkflowSummary{ID: w.id, Name: w.name, CreatedAt: w.created, Tasks: len(w.tasks), Counts: map[backend.State]int64{}}
	for _, id := range w.tasks {
		if j, ok := s.jobs[id]; ok {
			out.Counts[j.State]++
		} else {
			out.Tasks-- // deleted
		}
	}
	return out
}

// WorkflowGet implements backend.WorkflowStore.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.WorkflowDetail, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workflows[id]
	if !ok {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	d := &backend.WorkflowDetail{WorkflowSummary: *s.summary(w), Jobs: []*backend.JobRow{}, Edges: []backend.WorkflowEdge{}}
	for _, jid := range w.tasks {
		if j, ok := s.jobs[jid]; ok {
			d.Jobs = append(d.Jobs, copyRow(j))
			d.Edges = append(d.Edges, s.parents[jid]...)
		}
	}
	return d, nil
}

// WorkflowList implements backend.WorkflowStore.
func (b *Backend) WorkflowList(ctx context.Context, p *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []*workflowRec
	for _, w := range s.workflows {
		if p.BeforeID == 0 || w.id < p.BeforeID {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *workflowRec) int { return cmp.Compare(b.id, a.id) })
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	ws = ws[:min(len(ws), limit)]
	out := make([]*backend.WorkflowSummary, len(ws))
	for i, w := range ws {
		out[i] = s.summary(w)
	}
	return out, nil
}

// lockWorkflow takes the store's lock and returns workflow id; on an error
// the lock is not held.
func (b *Backend) lockWorkflow(op string, id int64) (*workflowRec, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("%s workflow %d: %w", op, id, err)
	}
	b.s.mu.Lock()
	w, ok := b.s.workflows[id]
	if !ok {
		b.s.mu.Unlock()
		return nil, fmt.Errorf("%s workflow %d: %w", op, id, backend.ErrWorkflowNotFound)
	}
	return w, nil
}

// WorkflowCancel implements backend.WorkflowStore.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	t := now()
	s := b.s
	w, err := b.lockWorkflow("cancel", id)
	if err != nil {
		return 0, err
	}
	n := 0
	var wakes, settled []backend.Wake
	var ids []int64
	for _, jid := range w.tasks {
		j, ok := s.jobs[jid]
		if !ok || j.State.IsFinal() {
			continue
		}
		if j.State == backend.StateRunning {
			wakes = append(wakes, backend.Wake{CancelledID: j.ID})
		}
		j.State, j.FinalizedAt, j.LeasedUntil, j.LeasedBy, j.WaitKind = backend.StateCancelled, timePtr(t), nil, "", ""
		ids = append(ids, j.ID)
		n++
	}
	settled = s.settle(ids, t)
	s.mu.Unlock()
	s.hub.Publish(append(wakes, settled...)...)
	return n, nil
}

// WorkflowRetry implements backend.WorkflowStore.
func (b *Backend) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	t := now()
	s := b.s
	w, err := b.lockWorkflow("retry", id)
	if err != nil {
		return 0, err
	}
	states := make(map[int64]backend.State, len(w.tasks))
	var edges []backend.WorkflowEdge
	for _, jid := range w.tasks {
		if j, ok := s.jobs[jid]; ok {
			states[jid] = j.State
			edges = append(edges, s.parents[jid]...)
		}
	}
	plan, err := backend.PlanWorkflowRetry(states, edges)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	// A task that takes back a unique key held by another job refuses the
	// whole retry, before anything changes.
	for _, rt := range plan {
		j := s.jobs[rt.ID]
		if j.UniqueKey != "" && !j.UniqueStates.Has(j.State) {
			if h, held := s.holder(j.UniqueKey); held && h != j {
				s.mu.Unlock()
				return 0, fmt.Errorf("retry workflow %d: task %q: %w", id, j.WorkflowTask, backend.ErrUniqueConflict)
			}
		}
	}
	var made []*backend.JobRow
	for _, rt := range plan {
		j := s.jobs[rt.ID]
		if j.UniqueKey != "" && !j.UniqueStates.Has(j.State) {
			s.unique[j.UniqueKey] = j
		}
		j.Attempt, j.FinalizedAt, j.LeasedUntil, j.LeasedBy = 0, nil, nil, ""
		j.HasDependents, j.DepsLeft = rt.HasDependents, rt.DepsLeft
		if rt.DepsLeft > 0 {
			j.State, j.WaitKind = backend.StateWaiting, backend.WaitDeps
			continue
		}
		j.State, j.WaitKind, j.RunAt = backend.StateAvailable, "", t
		made = append(made, j)
	}
	s.mu.Unlock()
	s.hub.Publish(runnable(made, t)...)
	return len(plan), nil
}

// JobDependencies implements backend.WorkflowStore.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("read dependencies of job %d: %w", id, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []backend.DependencyOutput{}
	for _, e := range s.parents[id] {
		if p, ok := s.jobs[e.Parent]; ok {
			out = append(out, backend.DependencyOutput{JobID: p.ID, Task: p.WorkflowTask, State: p.State, Output: slices.Clone(p.Output)})
		}
	}
	return out, nil
}

// settle writes the final states of the jobs ids (those flagged
// has_dependents and final; others are skipped) to what waits for them:
// each dependent's count goes down, or the dependent is cancelled (and
// settled in turn) when its edge says so; each batch member's batch counts
// it. A job is settled once: its flag is cleared. It returns the wake-ups
// of the jobs it made available; s.mu is held.
func (s *store) settle(ids []int64, t time.Time) []backend.Wake {
	var made []*backend.JobRow
	for len(ids) > 0 {
		var next []int64
		for _, id := range ids {
			j, ok := s.jobs[id]
			if !ok || !j.HasDependents || !j.State.IsFinal() {
				continue
			}
			j.HasDependents = false
			for _, e := range s.children[id] {
				c, ok := s.jobs[e.Child]
				if !ok || c.State != backend.StateWaiting {
					continue
				}
				if j.State != backend.StateCompleted && e.OnFail == backend.DepFailCancel {
					c.State, c.FinalizedAt, c.WaitKind = backend.StateCancelled, timePtr(t), ""
					c.Errors = append(c.Errors, backend.AttemptError{At: t, Error: fmt.Sprintf("dependency %q (job %d) ended %s", j.WorkflowTask, j.ID, j.State)})
					next = append(next, c.ID)
					continue
				}
				if c.DepsLeft--; c.DepsLeft <= 0 {
					s.release(c, t)
					made = append(made, c)
				}
			}
			if j.BatchID != 0 {
				made = append(made, s.countMember(j, t)...)
			}
		}
		ids = next
	}
	return runnable(made, t)
}

// release makes a waiting job pending: available, or scheduled when its
// run_at is ahead.
func (s *store) release(c *backend.JobRow, t time.Time) {
	c.DepsLeft, c.WaitKind = 0, ""
	c.State = backend.StateAvailable
	if c.RunAt.After(t) {
		c.State = backend.StateScheduled
	}
}

// countMember counts a final member in its batch and settles the batch's
// callbacks if that made it final; s.mu is held.
func (s *store) countMember(j *backend.JobRow, t time.Time) []*backend.JobRow {
	bt, ok := s.batches[j.BatchID]
	if !ok {
		return nil
	}
	switch j.State {
	case backend.StateCompleted:
		bt.Completed++
	case backend.StateDiscarded:
		bt.Discarded++
	default:
		bt.Cancelled++
	}
	return s.fireBatch(bt, t)
}

// fireBatch settles a sealed, final batch's callbacks, once.
func (s *store) fireBatch(bt *backend.Batch, t time.Time) []*backend.JobRow {
	if !bt.Sealed || !bt.Final() || bt.FinishedAt != nil {
		return nil
	}
	bt.FinishedAt = timePtr(t)
	failed := bt.Discarded+bt.Cancelled > 0
	var made []*backend.JobRow
	for _, cb := range []struct {
		id   *int64
		runs bool
	}{{&bt.OnSuccess, !failed}, {&bt.OnFailure, failed}, {&bt.OnComplete, true}} {
		c, ok := s.jobs[*cb.id]
		if *cb.id == 0 || !ok || c.State != backend.StateWaiting {
			continue
		}
		if !cb.runs {
			delete(s.jobs, c.ID)
			*cb.id = 0
			continue
		}
		s.release(c, t)
		made = append(made, c)
	}
	return made
}

// retained reports whether retention keeps a finished job: a task of a
// workflow not all final, or a member of a batch not final; s.mu is held.
func (s *store) retained(j *backend.JobRow) bool {
	if j.WorkflowID != 0 {
		if w, ok := s.workflows[j.WorkflowID]; ok {
			for _, id := range w.tasks {
				if t, ok := s.jobs[id]; ok && !t.State.IsFinal() {
					return true
				}
			}
		}
	}
	if j.BatchID != 0 {
		if bt, ok := s.batches[j.BatchID]; ok && bt.FinishedAt == nil {
			return true
		}
	}
	return false
}

// BatchInsert implements backend.WorkflowStore.
func (b *Backend) BatchInsert(ctx context.Context, p *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	s.nextBatch++
	bt := &backend.Batch{ID: s.nextBatch, Name: p.Name, CreatedAt: t, Sealed: p.Sealed}
	var rows []*backend.JobRow
	for _, cb := range []struct {
		jp *backend.JobInsertParams
		id *int64
	}{{p.Callbacks.OnSuccess, &bt.OnSuccess}, {p.Callbacks.OnFailure, &bt.OnFailure}, {p.Callbacks.OnComplete, &bt.OnComplete}} {
		if cb.jp == nil {
			continue
		}
		s.nextID++
		r := newRow(s.nextID, cb.jp, t)
		r.State, r.WaitKind, r.DepsLeft, r.BatchID = backend.StateWaiting, backend.WaitDeps, 1, bt.ID
		*cb.id = r.ID
		rows = append(rows, r)
	}
	members, ids, dups := s.newMembers(bt, p.Jobs, t, tx != nil)
	rows = append(rows, members...)
	commit := func(s *store) { s.batches[bt.ID] = bt }
	var wakes []backend.Wake
	if tx == nil {
		commit(s)
		for _, r := range rows {
			s.jobs[r.ID] = r
		}
		wakes = runnable(rows, t)
		wakes = append(wakes, runnable(s.fireBatch(bt, t), t)...)
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts(rows); err != nil {
			s.mu.Lock()
			s.forgetTxRows(rows)
			s.mu.Unlock()
			return nil, fmt.Errorf("insert batch: %w", err)
		}
		tx.mu.Lock()
		// An empty sealed batch is final at once: its callbacks settle at
		// the commit, after the rows are in.
		tx.commits = append(tx.commits, commit, func(s *store) { s.hub.Publish(runnable(s.fireBatch(bt, t), t)...) })
		tx.mu.Unlock()
	}
	s.hub.Publish(wakes...)
	return &backend.BatchInsertResult{ID: bt.ID, IDs: ids, Duplicates: dups}, nil
}

// newMembers builds the rows of new members of bt and counts them in its
// total; s.mu is held.
func (s *store) newMembers(bt *backend.Batch, jobs []*backend.JobInsertParams, t time.Time, inTx bool) (rows []*backend.JobRow, ids []int64, dups []bool) {
	ids = make([]int64, len(jobs))
	for i, jp := range jobs {
		if jp.UniqueKey != "" {
			if h, held := s.holder(jp.UniqueKey); held {
				if dups == nil {
					dups = make([]bool, len(jobs))
				}
				ids[i], dups[i] = h.ID, true
				continue
			}
		}
		s.nextID++
		r := newRow(s.nextID, jp, t)
		r.BatchID, r.HasDependents = bt.ID, true
		rows, ids[i] = append(rows, r), r.ID
		if r.UniqueKey != "" {
			s.unique[r.UniqueKey] = r
			if inTx {
				s.inOpenTx[r] = true
			}
		}
	}
	bt.Total += len(rows)
	return rows, ids, dups
}

// BatchAdd implements backend.WorkflowStore.
func (b *Backend) BatchAdd(ctx context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	bt, ok := s.batches[p.ID]
	switch {
	case !ok:
		s.mu.Unlock()
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, backend.ErrBatchNotFound)
	case bt.Sealed:
		s.mu.Unlock()
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, backend.ErrBatchSealed)
	}
	rows, ids, dups := s.newMembers(bt, p.Jobs, t, tx != nil)
	var wakes []backend.Wake
	if tx == nil {
		for _, r := range rows {
			s.jobs[r.ID] = r
		}
		wakes = runnable(rows, t)
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts(rows); err != nil {
			s.mu.Lock()
			bt.Total -= len(rows)
			s.forgetTxRows(rows)
			s.mu.Unlock()
			return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
		}
	}
	s.hub.Publish(wakes...)
	return &backend.JobInsertManyResult{IDs: ids, Duplicates: dups, Count: len(rows)}, nil
}

// BatchSeal implements backend.WorkflowStore.
func (b *Backend) BatchSeal(ctx context.Context, id int64) (*backend.Batch, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("seal batch %d: %w", id, err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	bt, ok := s.batches[id]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("seal batch %d: %w", id, backend.ErrBatchNotFound)
	}
	bt.Sealed = true
	wakes := runnable(s.fireBatch(bt, t), t)
	out := *bt
	s.mu.Unlock()
	s.hub.Publish(wakes...)
	return &out, nil
}

// BatchGet implements backend.WorkflowStore.
func (b *Backend) BatchGet(ctx context.Context, id int64) (*backend.Batch, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("get batch %d: %w", id, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	bt, ok := s.batches[id]
	if !ok {
		return nil, fmt.Errorf("get batch %d: %w", id, backend.ErrBatchNotFound)
	}
	out := *bt
	return &out, nil
}

// BatchList implements backend.WorkflowStore.
func (b *Backend) BatchList(ctx context.Context, p *backend.BatchListParams) ([]*backend.Batch, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*backend.Batch
	for _, bt := range s.batches {
		if p.BeforeID == 0 || bt.ID < p.BeforeID {
			c := *bt
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *backend.Batch) int { return cmp.Compare(b.ID, a.ID) })
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	return out[:min(len(out), limit)], nil
}

// BatchMembers implements backend.WorkflowStore.
func (b *Backend) BatchMembers(ctx context.Context, p *backend.BatchMembersParams) ([]*backend.JobRow, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	bt, ok := s.batches[p.ID]
	if !ok {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, backend.ErrBatchNotFound)
	}
	var out []*backend.JobRow
	for _, j := range s.jobs {
		if j.BatchID == p.ID && j.ID > p.AfterID && !bt.IsCallback(j.ID) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *backend.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	out = out[:min(len(out), limit)]
	for i, j := range out {
		out[i] = copyRow(j)
	}
	return out, nil
}

var _ backend.WorkflowStore = (*Backend)(nil)
