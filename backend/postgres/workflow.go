package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/backend"
)

// Workflows and batches (docs/workflows.md). A batch's jobs stay in
// spool_jobs; a workflow's tasks are claimed into lease rows as plain jobs
// are (schema 28), those with dependents into rows of their own (flagged
// deps). The plain finish statements leave jobs with dependents alone
// (has_dependents in their guard in place, the deps flag in lease rows);
// JobFinishMany then writes them here, in one transaction with the
// settling of what waits for them. Readers of a workflow's tasks read its
// leased ones too; writers (cancel, retry) first move them back in place.

func (b *Backend) quotedSchema() string { return pgx.Identifier{b.schema}.Sanitize() }

var _ backend.WorkflowStore = (*Backend)(nil)

// inTx runs fn in db's transaction: a new one on the pool, or the
// caller's.
func (b *Backend) inTx(ctx context.Context, db DBTX, fn func(tx DBTX) error) error {
	if db != DBTX(b.pool) {
		return fn(db)
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(tx) })
}

// announce wakes the queues of jobs a write made available: after the
// commit on the pool, in the caller's transaction otherwise.
func (b *Backend) announce(ctx context.Context, db DBTX, keys queueKeys) error {
	if len(keys) == 0 {
		return nil
	}
	for q, k := range keys {
		b.floors.lower(q, k.key)
	}
	if db == DBTX(b.pool) {
		b.announceDue(ctx, keys)
		return nil
	}
	return b.notifyDue(ctx, db, keys)
}

// finishDependents writes the finishes that the plain statements rejected
// to the jobs among them that have dependents, and settles those, in one
// transaction; it returns the rejections that remain.
func (b *Backend) finishDependents(ctx context.Context, db DBTX, fs []backend.JobFinish, rejected []backend.LeaseRef) ([]backend.LeaseRef, error) {
	want := make(map[backend.LeaseRef]bool, len(rejected))
	for _, l := range rejected {
		want[l] = true
	}
	var (
		ids, delays []int64
		fences      []int32
		outcomes    []int16
		errs        []json.RawMessage
	)
	for _, f := range fs {
		if !want[f.Lease] {
			continue
		}
		var e json.RawMessage
		if f.Error != nil {
			var err error
			if e, err = json.Marshal(struct {
				Attempt int    `json:"attempt"`
				Error   string `json:"error"`
				Trace   string `json:"trace,omitempty"`
			}{f.Error.Attempt, f.Error.Error, f.Error.Trace}); err != nil {
				return nil, fmt.Errorf("encode error: %w", err)
			}
		}
		ids, fences, outcomes, delays, errs = append(ids, f.Lease.ID), append(fences, f.Lease.Fence), append(outcomes, int16(f.Outcome)), append(delays, micros(f.Delay)), append(errs, e)
	}
	done, err := b.finishDependentsParts(ctx, db, ids, fences, outcomes, delays, errs)
	if err != nil {
		return nil, err
	}
	applied := make(map[backend.LeaseRef]bool, len(done))
	for _, l := range done {
		applied[l] = true
	}
	var left []backend.LeaseRef
	for _, l := range rejected {
		if !applied[l] {
			left = append(left, l)
		}
	}
	return left, nil
}

// Parts of a settling finish batch written on the pool: each part as
// many finishes as about settlePartRows settled rows allow, at the rows
// per finish seen last; firstSettlePart finishes when none was seen yet.
const (
	firstSettlePart = 8
	settlePartRows  = 4000
	settleRateUnit  = 1024
)

// finishDependentsParts writes the finishes given as arrays and settles
// their dependents, each finish in the transaction that settles what
// waits for it, and returns the leases it applied. In the caller's
// transaction that is one transaction. On the pool a batch is cut into
// transactions of whole finishes (finishDependentsTx) that settle about
// settlePartRows rows each: a batch of finishes releasing a large fan-out
// (1,000 roots of 100 tasks each) then commits its first tasks after a
// few roots, and claims find them while the rest is released, instead of
// after one transaction that writes every released row. A part's size
// comes from the rows per finish of the part before (of this batch, or of
// the last batch written): a batch whose finishes settle few rows (tasks
// before a fan-in) is one transaction. A failure after a part committed
// matches errPartlyApplied.
func (b *Backend) finishDependentsParts(ctx context.Context, db DBTX, ids []int64, fences []int32, outcomes []int16, delays []int64, errs []json.RawMessage) ([]backend.LeaseRef, error) {
	if db != DBTX(b.pool) {
		done, _, err := b.finishDependentsTx(ctx, db, ids, fences, outcomes, delays, errs)
		return done, err
	}
	var done []backend.LeaseRef
	rate := b.settleRate.Load()
	for start := 0; start < len(ids); {
		part := b.settleFirst
		if rate > 0 {
			part = int(max(1, int64(b.settleRows)*settleRateUnit/max(rate-1, 1)))
		}
		end := min(start+part, len(ids))
		d, settled, err := b.finishDependentsTx(ctx, db, ids[start:end], fences[start:end], outcomes[start:end], delays[start:end], errs[start:end])
		if err != nil {
			if start > 0 {
				err = fmt.Errorf("%w: %w", errPartlyApplied, err)
			}
			return nil, err
		}
		done = append(done, d...)
		rate = int64(settled)*settleRateUnit/int64(end-start) + 1
		b.settleRate.Store(rate)
		start = end
	}
	return done, nil
}

// finishDependentsTx writes the finishes given as arrays and settles their
// dependents in one transaction of db, announces the jobs it made
// available, and returns the leases it applied and the number of rows
// the settle wrote.
func (b *Backend) finishDependentsTx(ctx context.Context, db DBTX, ids []int64, fences []int32, outcomes []int16, delays []int64, errs []json.RawMessage) ([]backend.LeaseRef, int, error) {
	var (
		done    []backend.LeaseRef
		wake    queueKeys
		set     finals
		settled int
	)
	err := b.inTx(ctx, db, func(tx DBTX) error {
		done, wake, set, settled = done[:0], nil, finals{}, 0
		// Jobs in lease rows first (schema 28: where a claim puts a
		// workflow's tasks), then in place what they did not take (a
		// job claimed in place, or moved back by a cancel or a rescue).
		// The leased statements over more than genericPlanMax jobs are
		// planned with their arguments on every call (customPlan), as
		// the plain leased finishes are: on a cached generic plan $1 is
		// no constant, so the lookup of each candidate lease row's ids
		// in the batch (fragments/locate.sql) scanned the whole array
		// instead of hashing it, about a third more server CPU a
		// completion of a wide batch (BENCHMARKS.md, "A DAG task's
		// completion against a plain job's"). A small batch keeps the
		// cached statement: planning would cost it more than the scan.
		plan := func(args ...any) []any {
			if len(ids) > genericPlanMax {
				return b.customPlan(args...)
			}
			return args
		}
		var err error
		if completions(outcomes, errs) {
			err = b.finishDepsRows(ctx, tx, b.sql.wf.completeDepsLeased, plan(ids, fences), &done, &set, &wake)
		} else {
			err = b.finishDepsRows(ctx, tx, b.sql.wf.finishDepsLeased, plan(ids, fences, outcomes, delays, errs), &done, &set, &wake)
		}
		if err != nil {
			return err
		}
		if len(done) < len(ids) {
			if err := b.finishDepsRows(ctx, tx, b.sql.wf.finishDeps, []any{ids, fences, outcomes, delays, errs}, &done, &set, &wake); err != nil {
				return err
			}
		}
		next, err := b.settleFinals(ctx, tx, &set, &wake, &settled)
		if err != nil {
			return err
		}
		return b.settle(ctx, tx, next, &wake, &settled)
	})
	if err != nil {
		return nil, 0, err
	}
	if err := b.announce(ctx, db, wake); err != nil {
		return nil, 0, err
	}
	return done, settled, nil
}

// completions reports whether every outcome is a completion without an
// error: complete_deps_leased.sql's case.
func completions(outcomes []int16, errs []json.RawMessage) bool {
	for i, o := range outcomes {
		if backend.Outcome(o) != backend.OutcomeComplete || errs[i] != nil {
			return false
		}
	}
	return true
}

// finishDepsRows runs query (finish_deps.sql, finish_deps_leased.sql or
// complete_deps_leased.sql) in tx with args, the finishes as arrays,
// adding the leases it applied to done, the jobs it made final to set and
// those it made available to wake.
func (b *Backend) finishDepsRows(ctx context.Context, tx DBTX, query string, args []any, done *[]backend.LeaseRef, set *finals, wake *queueKeys) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			l            backend.LeaseRef
			state, queue string
			k            claimKey
			batch        int64
		)
		if err := rows.Scan(&l.ID, &l.Fence, &state, &queue, &k.priority, &k.runAt, &batch); err != nil {
			return err
		}
		*done = append(*done, l)
		switch s := backend.State(state); {
		case s.IsFinal():
			set.add(l.ID, s, batch)
		case s == backend.StateAvailable:
			k.id = l.ID
			wake.note(queue, k)
		}
	}
	return rows.Err()
}

// finals are jobs that became final and lost their has_dependents flag
// in the settling transaction: each with whether it completed, and the
// counts of its batch members by final state.
type finals struct {
	parents []int64
	oks     []bool
	order   []int64 // batches, in first-seen order
	counts  map[int64]*[3]int
}

// add notes job id, final in state s, member of batch (0: none).
func (f *finals) add(id int64, s backend.State, batch int64) {
	f.parents, f.oks = append(f.parents, id), append(f.oks, s == backend.StateCompleted)
	if batch == 0 {
		return
	}
	if f.counts == nil {
		f.counts = map[int64]*[3]int{}
	}
	c := f.counts[batch]
	if c == nil {
		c = &[3]int{}
		f.counts[batch] = c
		f.order = append(f.order, batch)
	}
	switch s {
	case backend.StateCompleted:
		c[0]++
	case backend.StateDiscarded:
		c[1]++
	default:
		c[2]++
	}
}

// settle writes, in tx, the final states of the jobs ids that have
// dependents (others are skipped) to what waits for them, noting the jobs
// it makes available in wake and adding the rows it settled to settled
// (nil: not counted).
func (b *Backend) settle(ctx context.Context, tx DBTX, ids []int64, wake *queueKeys, settled *int) error {
	for len(ids) > 0 {
		rows, err := tx.Query(ctx, b.sql.wf.settleParents, ids)
		if err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		var set finals
		for rows.Next() {
			var (
				id, batch int64
				state     string
			)
			if err := rows.Scan(&id, &state, &batch); err != nil {
				rows.Close()
				return fmt.Errorf("settle dependents: %w", err)
			}
			set.add(id, backend.State(state), batch)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		if ids, err = b.settleFinals(ctx, tx, &set, wake, settled); err != nil {
			return err
		}
	}
	return nil
}

// settleFinals settles the dependents of the jobs of set, whose flags are
// cleared, adds the rows it settled to settled (nil: not counted), and
// returns the
// dependents it cancelled, to settle in turn. Batches are counted in id
// order, so that two transactions counting the same batches (settling
// writers, processes) wait for each other instead of deadlocking.
func (b *Backend) settleFinals(ctx context.Context, tx DBTX, set *finals, wake *queueKeys, settled *int) ([]int64, error) {
	if len(set.parents) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, b.sql.wf.settleChildren, set.parents, set.oks)
	if err != nil {
		return nil, fmt.Errorf("settle dependents: %w", err)
	}
	var next []int64
	for rows.Next() {
		var (
			k            claimKey
			state, queue string
		)
		if err := rows.Scan(&k.id, &state, &queue, &k.priority, &k.runAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("settle dependents: %w", err)
		}
		if settled != nil {
			*settled++
		}
		switch backend.State(state) {
		case backend.StateCancelled:
			next = append(next, k.id)
		case backend.StateAvailable:
			wake.note(queue, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("settle dependents: %w", err)
	}
	slices.Sort(set.order)
	for _, id := range set.order {
		c := set.counts[id]
		if _, err := tx.Exec(ctx, b.sql.wf.batchCount, id, c[0], c[1], c[2]); err != nil {
			return nil, fmt.Errorf("count batch %d: %w", id, err)
		}
		if err := b.finishBatch(ctx, tx, id, wake); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// finishBatch finishes batch id once it is sealed and every member is
// final, once: callbacks whose condition holds become pending, the others
// are deleted.
func (b *Backend) finishBatch(ctx context.Context, tx DBTX, id int64, wake *queueKeys) error {
	var failed, onSuccess, onFailure, onComplete int64
	err := tx.QueryRow(ctx, b.sql.wf.batchFinish, id).Scan(&failed, &onSuccess, &onFailure, &onComplete)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish batch %d: %w", id, err)
	}
	keep := [3]int64{onSuccess, onFailure, onComplete}
	for i, cb := range keep {
		if cb == 0 {
			continue
		}
		if runs := i == 2 || (i == 0) == (failed == 0); !runs {
			if _, err := tx.Exec(ctx, b.sql.wf.dropCallback, cb); err != nil {
				return fmt.Errorf("finish batch %d: %w", id, err)
			}
			keep[i] = 0
			continue
		}
		var (
			k     claimKey
			queue string
		)
		switch err := tx.QueryRow(ctx, b.sql.wf.release, cb).Scan(&queue, &k.priority, &k.runAt, &k.id); {
		case err == nil:
			wake.note(queue, k)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("finish batch %d: %w", id, err)
		}
	}
	if _, err := tx.Exec(ctx, b.sql.wf.batchCallbacks, id, keep[0], keep[1], keep[2]); err != nil {
		return fmt.Errorf("finish batch %d: %w", id, err)
	}
	return nil
}

// taskRow is one job of insertTasks with its workflow or batch columns.
type taskRow struct {
	job      *backend.JobInsertParams
	waits    bool
	deps     int
	hasDeps  bool
	task     string
	callback bool
}

// nextIDs takes n ids of spool_jobs, in increasing order.
func (b *Backend) nextIDs(ctx context.Context, tx DBTX, n int) ([]int64, error) {
	ids := make([]int64, 0, n)
	if n == 0 {
		return ids, nil
	}
	r, err := tx.Query(ctx, b.sql.wf.nextIDs, n)
	if err != nil {
		return nil, err
	}
	for r.Next() {
		var id int64
		if err := r.Scan(&id); err != nil {
			r.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	r.Close()
	return ids, r.Err()
}

// insertTasks inserts rows in tx with ids taken first, in order (or
// given, one per row), and returns the ids; a unique row whose key is held
// inserts nothing, which dups reports (its id is then the holder's).
func (b *Backend) insertTasks(ctx context.Context, tx DBTX, rows []taskRow, workflow, batch int64, ids []int64) (_ []int64, dups []bool, err error) {
	if len(rows) == 0 {
		return []int64{}, nil, nil
	}
	if ids == nil {
		if ids, err = b.nextIDs(ctx, tx, len(rows)); err != nil {
			return nil, nil, err
		}
	}
	n := len(rows)
	var (
		queues, kinds, tags, uKeys, flowKeys, tasks = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		args, metas                                 = make([]json.RawMessage, n), make([]json.RawMessage, n)
		prios, maxes, uStates                       = make([]int16, n), make([]int16, n), make([]int16, n)
		runAts                                      = make([]*time.Time, n)
		delays                                      = make([]int64, n)
		waits, hasDeps                              = make([]bool, n), make([]bool, n)
		deps                                        = make([]int32, n)
	)
	for i, t := range rows {
		j := t.job
		queues[i], kinds[i], args[i], prios[i], runAts[i], delays[i], maxes[i] = j.Queue, j.Kind, j.Args, j.Priority, j.RunAt, micros(j.Delay), j.MaxAttempts
		tags[i] = strings.Join(j.Tags, ",")
		if len(j.Metadata) > 0 {
			metas[i] = j.Metadata
		}
		uKeys[i], uStates[i], flowKeys[i] = j.UniqueKey, int16(j.UniqueStates), j.FlowKey
		waits[i], deps[i], hasDeps[i], tasks[i] = t.waits, int32(t.deps), t.hasDeps, t.task
	}
	query := b.sql.wf.insertTasksKeyless
	for _, t := range rows {
		if t.job.UniqueKey != "" {
			query = b.sql.wf.insertTasks
			break
		}
	}
	r, err := tx.Query(ctx, query, ids, queues, kinds, args, prios, runAts, delays, maxes, tags, metas,
		uKeys, uStates, flowKeys, waits, deps, hasDeps, workflow, batch, tasks)
	if err != nil {
		return nil, nil, err
	}
	got := make(map[int64]bool, n)
	for r.Next() {
		var id int64
		if err := r.Scan(&id); err != nil {
			r.Close()
			return nil, nil, err
		}
		got[id] = true
	}
	r.Close()
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	if len(got) == n {
		return ids, nil, nil
	}
	dups = make([]bool, n)
	for i, id := range ids {
		if got[id] {
			continue
		}
		if rows[i].job.UniqueKey == "" {
			return nil, nil, fmt.Errorf("job %d of the call was not inserted", i)
		}
		dups[i] = true
		err := tx.QueryRow(ctx, `SELECT id FROM `+b.quotedSchema()+`.spool_jobs WHERE unique_key = $1 AND `+b.quotedSchema()+`.spool_holds_key(unique_states, state)`, rows[i].job.UniqueKey).Scan(&ids[i])
		if err != nil {
			return nil, nil, fmt.Errorf("read the holder of a unique key: %w", err)
		}
	}
	return ids, dups, nil
}

// WorkflowInsert implements backend.WorkflowStore.
func (b *Backend) WorkflowInsert(ctx context.Context, p *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	rows := make([]taskRow, len(p.Tasks))
	for i, t := range p.Tasks {
		rows[i] = taskRow{job: t.Job, waits: len(t.Deps) > 0, deps: len(t.Deps), task: t.Name}
	}
	for _, t := range p.Tasks {
		for _, d := range t.Deps {
			rows[d.Task].hasDeps = true
		}
	}
	res := &backend.WorkflowInsertResult{}
	err = b.inTx(ctx, db, func(tx DBTX) error {
		// The tasks' ids are taken first: the workflow's row keeps their
		// range, over which its readers find them (schema 27).
		ids, err := b.nextIDs(ctx, tx, len(rows))
		if err != nil {
			return err
		}
		first, last := int64(1), int64(0)
		if len(ids) > 0 {
			first, last = slices.Min(ids), slices.Max(ids)
		}
		if err := tx.QueryRow(ctx, b.sql.wf.workflowInsert, p.Name, len(p.Tasks), first, last).Scan(&res.ID); err != nil {
			return err
		}
		ids, dups, err := b.insertTasks(ctx, tx, rows, res.ID, 0, ids)
		if err != nil {
			return err
		}
		for i, d := range dups {
			if d {
				return fmt.Errorf("task %q: %w", p.Tasks[i].Name, backend.ErrUniqueConflict)
			}
		}
		res.IDs = ids
		var parents, children []int64
		var onFail []int16
		for i, t := range p.Tasks {
			for _, d := range t.Deps {
				parents, children, onFail = append(parents, ids[d.Task]), append(children, ids[i]), append(onFail, int16(d.OnFail))
			}
		}
		if len(parents) > 0 {
			if _, err := tx.Exec(ctx, b.sql.wf.depsInsert, parents, children, onFail); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", b.explain(ctx, p.Tx, err))
	}
	return res, nil
}

// explain gives a failed write its backend error: a missing object means a
// store not migrated, a connection fault what it knows.
func (b *Backend) explain(ctx context.Context, tx backend.Tx, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42703" || pe.Code == "3F000") {
		return backend.ExplainMissingObject(ctx, b, err)
	}
	if errors.Is(err, backend.ErrUniqueConflict) {
		return err
	}
	return ownWriteError(tx == nil, err)
}

// WorkflowList implements backend.WorkflowStore.
func (b *Backend) WorkflowList(ctx context.Context, p *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.pool.Query(ctx, b.sql.wf.workflowSummary, p.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer rows.Close()
	out, err := backend.CollectWorkflowSummaries(rows, func(t time.Time) time.Time { return t })
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowGet implements backend.WorkflowStore.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.WorkflowDetail, error) {
	d := &backend.WorkflowDetail{Jobs: []*backend.JobRow{}, Edges: []backend.WorkflowEdge{}}
	err := b.pool.QueryRow(ctx, b.sql.wf.workflowGet, id).Scan(&d.ID, &d.Name, &d.CreatedAt, &d.Tasks)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	rows, err := b.pool.Query(ctx, b.sql.wf.workflowJobs, id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	if d.Jobs, err = collectJobs(rows); err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	d.Counts = map[backend.State]int64{}
	for _, j := range d.Jobs {
		d.Counts[j.State]++
	}
	d.Tasks = len(d.Jobs)
	rows, err = b.pool.Query(ctx, b.sql.wf.workflowEdges, id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e  backend.WorkflowEdge
			on int16
		)
		if err := rows.Scan(&e.Parent, &e.Child, &on); err != nil {
			return nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		e.OnFail = backend.DepFail(on)
		d.Edges = append(d.Edges, e)
	}
	return d, rows.Err()
}

// WorkflowCancel implements backend.WorkflowStore.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	var (
		n       int
		running []int64
		wake    queueKeys
	)
	err := b.inTx(ctx, b.pool, func(tx DBTX) error {
		n, running, wake = 0, nil, nil
		var one int64
		if err := tx.QueryRow(ctx, b.sql.wf.workflowLock, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return backend.ErrWorkflowNotFound
			}
			return err
		}
		// Its tasks in lease rows are cancelled in place, as JobCancel
		// cancels a leased job.
		if _, err := tx.Exec(ctx, b.sql.wf.workflowUnlease, id); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, b.sql.wf.workflowCancel, id)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var (
				c   int64
				ran bool
			)
			if err := rows.Scan(&c, &ran); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, c)
			if ran {
				running = append(running, c)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		n = len(ids)
		return b.settle(ctx, tx, ids, &wake, nil)
	})
	if err != nil {
		return 0, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	_ = b.announce(ctx, b.pool, wake)
	for _, r := range running {
		// A hint: the holder finds the cancel at its next heartbeat anyway.
		_, _ = b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel, cancelPrefix+fmt.Sprint(r))
	}
	return n, nil
}

// WorkflowRetry implements backend.WorkflowStore.
func (b *Backend) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	var (
		n    int
		wake queueKeys
	)
	err := b.inTx(ctx, b.pool, func(tx DBTX) error {
		n, wake = 0, nil
		var one int64
		if err := tx.QueryRow(ctx, b.sql.wf.workflowLock, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return backend.ErrWorkflowNotFound
			}
			return err
		}
		// A task in a lease row is running: moved back in place, it is
		// read as such below, which refuses the retry.
		if _, err := tx.Exec(ctx, b.sql.wf.workflowUnlease, id); err != nil {
			return err
		}
		states := map[int64]backend.State{}
		var (
			tid   int64
			state string
		)
		rows, err := tx.Query(ctx, b.sql.wf.workflowStates, id)
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&tid, &state}, func() error { states[tid] = backend.State(state); return nil }); err != nil {
			return err
		}
		var edges []backend.WorkflowEdge
		var e backend.WorkflowEdge
		var on int16
		rows, err = tx.Query(ctx, b.sql.wf.workflowEdges, id)
		if err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&e.Parent, &e.Child, &on}, func() error { edges = append(edges, e); return nil }); err != nil {
			return err
		}
		plan, err := backend.PlanWorkflowRetry(states, edges)
		if err != nil || len(plan) == 0 {
			return err
		}
		ids, deps, has := make([]int64, len(plan)), make([]int32, len(plan)), make([]bool, len(plan))
		for i, t := range plan {
			ids[i], deps[i], has[i] = t.ID, int32(t.DepsLeft), t.HasDependents
		}
		var (
			queue string
			k     claimKey
			now   bool
		)
		rows, err = tx.Query(ctx, b.sql.wf.workflowRetry, ids, deps, has)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&k.id, &queue, &k.priority, &k.runAt, &now}, func() error {
			n++
			if now {
				wake.note(queue, k)
			}
			return nil
		})
		return err
	})
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "spool_jobs_unique" {
		err = backend.ErrUniqueConflict
	}
	if err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	_ = b.announce(ctx, b.pool, wake)
	return n, nil
}

// JobDependencies implements backend.WorkflowStore.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	rows, err := b.pool.Query(ctx, b.sql.wf.dependencies, id)
	if err != nil {
		return nil, fmt.Errorf("read dependencies of job %d: %w", id, err)
	}
	defer rows.Close()
	out, err := backend.CollectDependencies(rows)
	if err != nil {
		return nil, fmt.Errorf("read dependencies of job %d: %w", id, err)
	}
	return out, nil
}

// addMembers inserts jobs as members of batch id in tx and counts them.
func (b *Backend) addMembers(ctx context.Context, tx DBTX, id int64, jobs []*backend.JobInsertParams) ([]int64, []bool, int, error) {
	rows := make([]taskRow, len(jobs))
	for i, j := range jobs {
		rows[i] = taskRow{job: j, hasDeps: true}
	}
	ids, dups, err := b.insertTasks(ctx, tx, rows, 0, id, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	n := len(ids)
	for _, d := range dups {
		if d {
			n--
		}
	}
	if _, err := tx.Exec(ctx, b.sql.wf.batchTotal, id, n); err != nil {
		return nil, nil, 0, err
	}
	return ids, dups, n, nil
}

// BatchInsert implements backend.WorkflowStore.
func (b *Backend) BatchInsert(ctx context.Context, p *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	res := &backend.BatchInsertResult{}
	var wake queueKeys
	err = b.inTx(ctx, db, func(tx DBTX) error {
		wake = nil
		if err := tx.QueryRow(ctx, b.sql.wf.batchInsert, p.Name, p.Sealed).Scan(&res.ID); err != nil {
			return err
		}
		var cbs [3]int64
		for i, cb := range []*backend.JobInsertParams{p.Callbacks.OnSuccess, p.Callbacks.OnFailure, p.Callbacks.OnComplete} {
			if cb == nil {
				continue
			}
			ids, _, err := b.insertTasks(ctx, tx, []taskRow{{job: cb, waits: true, deps: 1, callback: true}}, 0, res.ID, nil)
			if err != nil {
				return err
			}
			cbs[i] = ids[0]
		}
		if _, err := tx.Exec(ctx, b.sql.wf.batchCallbacks, res.ID, cbs[0], cbs[1], cbs[2]); err != nil {
			return err
		}
		var err error
		if res.IDs, res.Duplicates, _, err = b.addMembers(ctx, tx, res.ID, p.Jobs); err != nil {
			return err
		}
		return b.finishBatch(ctx, tx, res.ID, &wake)
	})
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", b.explain(ctx, p.Tx, err))
	}
	if err := b.announce(ctx, db, wake); err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	return res, nil
}

// BatchAdd implements backend.WorkflowStore.
func (b *Backend) BatchAdd(ctx context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	res := &backend.JobInsertManyResult{}
	err = b.inTx(ctx, db, func(tx DBTX) error {
		var sealed bool
		switch err := tx.QueryRow(ctx, b.sql.wf.batchLock, p.ID).Scan(&sealed); {
		case errors.Is(err, pgx.ErrNoRows):
			return backend.ErrBatchNotFound
		case err != nil:
			return err
		case sealed:
			return backend.ErrBatchSealed
		}
		var err error
		res.IDs, res.Duplicates, res.Count, err = b.addMembers(ctx, tx, p.ID, p.Jobs)
		return err
	})
	if err != nil {
		if errors.Is(err, backend.ErrBatchNotFound) || errors.Is(err, backend.ErrBatchSealed) {
			return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
		}
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, b.explain(ctx, p.Tx, err))
	}
	return res, nil
}

// BatchSeal implements backend.WorkflowStore.
func (b *Backend) BatchSeal(ctx context.Context, id int64) (*backend.Batch, error) {
	var (
		bt   *backend.Batch
		wake queueKeys
	)
	err := b.inTx(ctx, b.pool, func(tx DBTX) error {
		wake = nil
		var one int64
		if err := tx.QueryRow(ctx, b.sql.wf.batchSeal, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return backend.ErrBatchNotFound
			}
			return err
		}
		if err := b.finishBatch(ctx, tx, id, &wake); err != nil {
			return err
		}
		var err error
		bt, err = scanBatch(tx.QueryRow(ctx, b.sql.wf.batchGet, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seal batch %d: %w", id, err)
	}
	_ = b.announce(ctx, b.pool, wake)
	return bt, nil
}

func scanBatch(row pgx.Row) (*backend.Batch, error) {
	var bt backend.Batch
	if err := row.Scan(&bt.ID, &bt.Name, &bt.CreatedAt, &bt.Sealed, &bt.Total, &bt.Completed, &bt.Discarded, &bt.Cancelled,
		&bt.FinishedAt, &bt.OnSuccess, &bt.OnFailure, &bt.OnComplete); err != nil {
		return nil, err
	}
	return &bt, nil
}

// BatchGet implements backend.WorkflowStore.
func (b *Backend) BatchGet(ctx context.Context, id int64) (*backend.Batch, error) {
	bt, err := scanBatch(b.pool.QueryRow(ctx, b.sql.wf.batchGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get batch %d: %w", id, backend.ErrBatchNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", id, err)
	}
	return bt, nil
}

// BatchList implements backend.WorkflowStore.
func (b *Backend) BatchList(ctx context.Context, p *backend.BatchListParams) ([]*backend.Batch, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.pool.Query(ctx, b.sql.wf.batchList, p.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	defer rows.Close()
	var out []*backend.Batch
	for rows.Next() {
		bt, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("list batches: %w", err)
		}
		out = append(out, bt)
	}
	return out, rows.Err()
}

// BatchMembers implements backend.WorkflowStore.
func (b *Backend) BatchMembers(ctx context.Context, p *backend.BatchMembersParams) ([]*backend.JobRow, error) {
	if _, err := b.BatchGet(ctx, p.ID); err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.pool.Query(ctx, b.sql.wf.batchMemberList, p.ID, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	out, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	return out, nil
}

// settleStray settles jobs with dependents that a write outside a finish
// left final but unsettled (a cancel, a bulk cancel, a rescue), and prunes
// the records of workflows and batches whose jobs are gone. The leader
// runs it with each rescue.
func (b *Backend) settleStray(ctx context.Context) error {
	var wake queueKeys
	err := b.inTx(ctx, b.pool, func(tx DBTX) error {
		wake = nil
		rows, err := tx.Query(ctx, b.sql.wf.unsettled)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return b.settle(ctx, tx, ids, &wake, nil)
	})
	if err != nil {
		return fmt.Errorf("settle dependents: %w", err)
	}
	return b.announce(ctx, b.pool, wake)
}
