package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/backend"
)

// Workflows and batches (docs/workflows.md). Their jobs stay in
// spool_jobs (claim.sql never leases a job of a workflow or batch), so a
// finish finds a job with dependents in place. The plain finish statements
// leave such jobs alone (has_dependents in their guard); JobFinishMany
// then writes them here, in one transaction with the settling of what
// waits for them.

// wfSQL are the statements of workflows and batches; {{s}} is the schema
// and {{cols}} the job column list.
var wfSQL = map[string]string{
	"finishDeps": `
UPDATE {{s}}.spool_jobs j SET
  state = {{s}}.spool_outcome_state(i.outcome, j.attempt, j.max_attempts, i.delay_us),
  run_at = CASE WHEN i.outcome IN (2, 3) THEN now() + i.delay_us * interval '1 microsecond' ELSE j.run_at END,
  attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
  finalized_at = CASE WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN now() END,
  leased_until = NULL, leased_by = NULL,
  -- A final job is settled by this transaction (finishDependents): its
  -- flag goes here, in the same row version.
  has_dependents = NOT (i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts)),
  errors = CASE WHEN i.err IS NULL THEN j.errors
    ELSE coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(i.err || jsonb_build_object('at', now())) END
FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[]) AS i(id, fence, outcome, delay_us, err)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running' AND j.has_dependents
RETURNING j.id, j.fence, j.state::text, j.queue, j.priority, j.run_at, coalesce(j.batch_id, 0)`,
	// Settling: parents lose their flag once, so each is settled once.
	"settleParents": `
UPDATE {{s}}.spool_jobs SET has_dependents = false
WHERE id = ANY($1::bigint[]) AND has_dependents AND state IN ('completed', 'discarded', 'cancelled')
RETURNING id, state::text, coalesce(batch_id, 0)`,
	// Dependents are locked in id order first, so that two finishes
	// settling parents with shared dependents wait for each other instead
	// of deadlocking. A released dependent is due from now at the latest,
	// so it lands above every claim floor. Each parent's edges and each
	// dependent are read by index (the LATERAL with OFFSET 0, the
	// id arrays): joined to the input as the planner first chose, every
	// settle read the whole edge table (220 µs of server time a task in a
	// drain of 100-wide workflows).
	"settleChildren": `
WITH p AS (SELECT * FROM unnest($1::bigint[], $2::boolean[]) AS t(id, ok)),
e AS MATERIALIZED (
  SELECT d.child_id AS cid, count(*)::integer AS n, bool_or(NOT p.ok AND d.on_fail = 0) AS fail
  FROM p CROSS JOIN LATERAL (SELECT child_id, on_fail FROM {{s}}.spool_deps WHERE parent_id = p.id OFFSET 0) d
  GROUP BY d.child_id
),
locked AS MATERIALIZED (
  SELECT c.id FROM {{s}}.spool_jobs c WHERE c.id = ANY (ARRAY(SELECT cid FROM e)) AND c.state = 'waiting'
  ORDER BY c.id FOR UPDATE
)
UPDATE {{s}}.spool_jobs c SET
  deps_left = c.deps_left - e.n,
  state = (CASE WHEN e.fail THEN 'cancelled' WHEN c.deps_left - e.n > 0 THEN 'waiting'
    WHEN c.run_at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  run_at = CASE WHEN NOT e.fail AND c.deps_left - e.n <= 0 THEN greatest(c.run_at, now()) ELSE c.run_at END,
  wait_kind = CASE WHEN e.fail OR c.deps_left - e.n <= 0 THEN NULL ELSE c.wait_kind END,
  finalized_at = CASE WHEN e.fail THEN now() END,
  errors = CASE WHEN e.fail THEN coalesce(c.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', c.attempt, 'at', now(), 'error', 'cancelled: a dependency ended discarded or cancelled'))
    ELSE c.errors END
FROM e
WHERE c.id = ANY (ARRAY(SELECT id FROM locked)) AND c.id = e.cid
RETURNING c.id, c.state::text, c.queue, c.priority, c.run_at`,
	"batchCount": `
UPDATE {{s}}.spool_batches SET completed = completed + $2, discarded = discarded + $3, cancelled = cancelled + $4
WHERE id = $1`,
	"batchFinish": `
UPDATE {{s}}.spool_batches SET finished_at = now()
WHERE id = $1 AND sealed AND finished_at IS NULL AND completed + discarded + cancelled >= total
RETURNING discarded + cancelled, coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)`,
	"release": `
UPDATE {{s}}.spool_jobs SET deps_left = 0, wait_kind = NULL, run_at = greatest(run_at, now()),
  state = (CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state
WHERE id = $1 AND state = 'waiting'
RETURNING queue, priority, run_at, id`,
	"dropCallback":   `DELETE FROM {{s}}.spool_jobs WHERE id = $1 AND state = 'waiting'`,
	"batchCallbacks": `UPDATE {{s}}.spool_batches SET on_success = nullif($2, 0), on_failure = nullif($3, 0), on_complete = nullif($4, 0) WHERE id = $1`,
	"workflowInsert": `INSERT INTO {{s}}.spool_workflows (name, tasks) VALUES ($1, $2) RETURNING id`,
	"nextIDs":        `SELECT nextval(pg_get_serial_sequence('{{s}}.spool_jobs', 'id')) FROM generate_series(1, $1)`,
	// Workflow tasks and batch jobs, with their ids chosen ($1) and their
	// workflow or batch columns.
	"insertTasks": `
INSERT INTO {{s}}.spool_jobs (id, queue, kind, args, priority, run_at, state, max_attempts, tags, metadata,
  unique_key, unique_states, flow_key, wait_kind, deps_left, has_dependents, workflow_id, workflow_task, batch_id)
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.at,
  (CASE WHEN t.waits THEN 'waiting' WHEN t.at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  t.max_attempts, string_to_array(t.tags, ','), coalesce(t.metadata, '{}'::jsonb),
  nullif(t.unique_key, ''), nullif(t.unique_states, 0), nullif(t.flow_key, ''),
  CASE WHEN t.waits THEN 'deps' END, t.deps, t.has_deps, nullif($17::bigint, 0), nullif(t.task, ''), nullif($18::bigint, 0)
FROM (
  SELECT u.*, coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond') AS at
  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::jsonb[], $5::smallint[], $6::timestamptz[], $7::bigint[],
              $8::smallint[], $9::text[], $10::jsonb[], $11::text[], $12::smallint[], $13::text[],
              $14::boolean[], $15::integer[], $16::boolean[], $19::text[])
    AS u(id, queue, kind, args, priority, run_at, delay_us, max_attempts, tags, metadata, unique_key, unique_states,
         flow_key, waits, deps, has_deps, task)
) t
ON CONFLICT DO NOTHING
RETURNING id`,
	"depsInsert": `INSERT INTO {{s}}.spool_deps (parent_id, child_id, on_fail) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[])`,
	"workflowSummary": `
WITH w AS (SELECT id, name, created_at, tasks FROM {{s}}.spool_workflows
  WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2)
SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state::text, ''), count(j.id)
FROM w LEFT JOIN {{s}}.spool_jobs j ON j.workflow_id = w.id
GROUP BY w.id, w.name, w.created_at, w.tasks, j.state
ORDER BY w.id DESC`,
	"workflowGet":   `SELECT id, name, created_at, tasks FROM {{s}}.spool_workflows WHERE id = $1`,
	"workflowJobs":  `SELECT {{cols}} FROM {{s}}.spool_jobs WHERE workflow_id = $1 ORDER BY id`,
	"workflowEdges": `SELECT d.parent_id, d.child_id, d.on_fail FROM {{s}}.spool_deps d JOIN {{s}}.spool_jobs j ON j.id = d.child_id WHERE j.workflow_id = $1`,
	"workflowCancel": `
UPDATE {{s}}.spool_jobs SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL, wait_kind = NULL
WHERE workflow_id = $1 AND state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING id, attempted_at IS NOT NULL AND attempt > 0`,
	"dependencies": `
SELECT p.id, coalesce(p.workflow_task, ''), p.state::text, p.output
FROM {{s}}.spool_deps d JOIN {{s}}.spool_jobs p ON p.id = d.parent_id
WHERE d.child_id = $1 ORDER BY p.id`,
	"batchInsert": `INSERT INTO {{s}}.spool_batches (name, sealed) VALUES ($1, $2) RETURNING id`,
	"batchTotal":  `UPDATE {{s}}.spool_batches SET total = total + $2 WHERE id = $1`,
	"batchLock":   `SELECT sealed FROM {{s}}.spool_batches WHERE id = $1 FOR UPDATE`,
	"batchSeal":   `UPDATE {{s}}.spool_batches SET sealed = true WHERE id = $1 RETURNING id`,
	"batchGet":    `SELECT {{batch_cols}} FROM {{s}}.spool_batches WHERE id = $1`,
	"batchList":   `SELECT {{batch_cols}} FROM {{s}}.spool_batches WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2`,
	"batchMemberList": `
SELECT {{cols}} FROM {{s}}.spool_jobs j
WHERE j.batch_id = $1 AND j.id > $2
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_batches b WHERE b.id = $1
    AND j.id IN (coalesce(b.on_success, 0), coalesce(b.on_failure, 0), coalesce(b.on_complete, 0)))
ORDER BY j.id LIMIT $3`,
	// A sweep for jobs whose dependents a write outside JobFinishMany left
	// unsettled (a cancel that lost its connection after its commit).
	"unsettled": `SELECT id FROM {{s}}.spool_jobs WHERE has_dependents AND state IN ('completed', 'discarded', 'cancelled') LIMIT 1000`,
	"prune": `
WITH e AS (DELETE FROM {{s}}.spool_deps d WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.id = d.child_id)),
w AS (DELETE FROM {{s}}.spool_workflows w WHERE NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.workflow_id = w.id)
  AND w.created_at < now() - interval '1 minute')
DELETE FROM {{s}}.spool_batches b WHERE b.finished_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs j WHERE j.batch_id = b.id)`,
}

// batchCols is the column list scanBatch reads.
const batchCols = `id, name, created_at, sealed, total, completed, discarded, cancelled, finished_at,
  coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)`

// wfq returns the statement name for b's schema.
func (b *Backend) wfq(name string) string {
	b.wfOnce.Do(func() {
		cols, _ := sqlFiles.ReadFile("sql/fragments/cols.sql")
		var lines []string
		for _, l := range strings.Split(string(cols), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		r := strings.NewReplacer("{{s}}", b.quotedSchema(), "{{cols}}", strings.TrimSpace(strings.Join(lines, "\n")), "{{batch_cols}}", batchCols)
		b.wfStmts = make(map[string]string, len(wfSQL))
		for k, v := range wfSQL {
			b.wfStmts[k] = r.Replace(strings.TrimSpace(v))
		}
	})
	q, ok := b.wfStmts[name]
	if !ok {
		panic("spool postgres: no workflow statement " + name)
	}
	return q
}

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
		b.floors.lower(q, k)
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
	var (
		done []backend.LeaseRef
		wake queueKeys
	)
	err := b.inTx(ctx, db, func(tx DBTX) error {
		done, wake = done[:0], nil
		rows, err := tx.Query(ctx, b.wfq("finishDeps"), ids, fences, outcomes, delays, errs)
		if err != nil {
			return err
		}
		var set finals
		for rows.Next() {
			var (
				l            backend.LeaseRef
				state, queue string
				k            claimKey
				batch        int64
			)
			if err := rows.Scan(&l.ID, &l.Fence, &state, &queue, &k.priority, &k.runAt, &batch); err != nil {
				rows.Close()
				return err
			}
			done = append(done, l)
			switch s := backend.State(state); {
			case s.IsFinal():
				set.add(l.ID, s, batch)
			case s == backend.StateAvailable:
				k.id = l.ID
				wake.note(queue, k)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		next, err := b.settleFinals(ctx, tx, &set, &wake)
		if err != nil {
			return err
		}
		return b.settle(ctx, tx, next, &wake)
	})
	if err != nil {
		return nil, err
	}
	if err := b.announce(ctx, db, wake); err != nil {
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
// it makes available in wake.
func (b *Backend) settle(ctx context.Context, tx DBTX, ids []int64, wake *queueKeys) error {
	for len(ids) > 0 {
		rows, err := tx.Query(ctx, b.wfq("settleParents"), ids)
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
		if ids, err = b.settleFinals(ctx, tx, &set, wake); err != nil {
			return err
		}
	}
	return nil
}

// settleFinals settles the dependents of the jobs of set, whose flags are
// cleared, and returns the dependents it cancelled, to settle in turn.
func (b *Backend) settleFinals(ctx context.Context, tx DBTX, set *finals, wake *queueKeys) ([]int64, error) {
	if len(set.parents) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, b.wfq("settleChildren"), set.parents, set.oks)
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
	for _, id := range set.order {
		c := set.counts[id]
		if _, err := tx.Exec(ctx, b.wfq("batchCount"), id, c[0], c[1], c[2]); err != nil {
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
	err := tx.QueryRow(ctx, b.wfq("batchFinish"), id).Scan(&failed, &onSuccess, &onFailure, &onComplete)
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
			if _, err := tx.Exec(ctx, b.wfq("dropCallback"), cb); err != nil {
				return fmt.Errorf("finish batch %d: %w", id, err)
			}
			keep[i] = 0
			continue
		}
		var (
			k     claimKey
			queue string
		)
		switch err := tx.QueryRow(ctx, b.wfq("release"), cb).Scan(&queue, &k.priority, &k.runAt, &k.id); {
		case err == nil:
			wake.note(queue, k)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("finish batch %d: %w", id, err)
		}
	}
	if _, err := tx.Exec(ctx, b.wfq("batchCallbacks"), id, keep[0], keep[1], keep[2]); err != nil {
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

// insertTasks inserts rows in tx with ids taken first, in order, and
// returns the ids; a unique row whose key is held inserts nothing, which
// dups reports (its id is then the holder's).
func (b *Backend) insertTasks(ctx context.Context, tx DBTX, rows []taskRow, workflow, batch int64) (ids []int64, dups []bool, err error) {
	if len(rows) == 0 {
		return []int64{}, nil, nil
	}
	ids = make([]int64, 0, len(rows))
	r, err := tx.Query(ctx, b.wfq("nextIDs"), len(rows))
	if err != nil {
		return nil, nil, err
	}
	for r.Next() {
		var id int64
		if err := r.Scan(&id); err != nil {
			r.Close()
			return nil, nil, err
		}
		ids = append(ids, id)
	}
	r.Close()
	if err := r.Err(); err != nil {
		return nil, nil, err
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
	r, err = tx.Query(ctx, b.wfq("insertTasks"), ids, queues, kinds, args, prios, runAts, delays, maxes, tags, metas,
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
		if err := tx.QueryRow(ctx, b.wfq("workflowInsert"), p.Name, len(p.Tasks)).Scan(&res.ID); err != nil {
			return err
		}
		ids, dups, err := b.insertTasks(ctx, tx, rows, res.ID, 0)
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
			if _, err := tx.Exec(ctx, b.wfq("depsInsert"), parents, children, onFail); err != nil {
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
	rows, err := b.pool.Query(ctx, b.wfq("workflowSummary"), p.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer rows.Close()
	var out []*backend.WorkflowSummary
	for rows.Next() {
		var (
			w     backend.WorkflowSummary
			state string
			n     int64
		)
		if err := rows.Scan(&w.ID, &w.Name, &w.CreatedAt, &w.Tasks, &state, &n); err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].ID != w.ID {
			w.Counts = map[backend.State]int64{}
			out = append(out, &w)
		}
		if state != "" {
			out[len(out)-1].Counts[backend.State(state)] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowGet implements backend.WorkflowStore.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.WorkflowDetail, error) {
	d := &backend.WorkflowDetail{Jobs: []*backend.JobRow{}, Edges: []backend.WorkflowEdge{}}
	err := b.pool.QueryRow(ctx, b.wfq("workflowGet"), id).Scan(&d.ID, &d.Name, &d.CreatedAt, &d.Tasks)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	rows, err := b.pool.Query(ctx, b.wfq("workflowJobs"), id)
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
	rows, err = b.pool.Query(ctx, b.wfq("workflowEdges"), id)
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
		if err := tx.QueryRow(ctx, `SELECT id FROM `+b.quotedSchema()+`.spool_workflows WHERE id = $1 FOR UPDATE`, id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return backend.ErrWorkflowNotFound
			}
			return err
		}
		rows, err := tx.Query(ctx, b.wfq("workflowCancel"), id)
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
		return b.settle(ctx, tx, ids, &wake)
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

// JobDependencies implements backend.WorkflowStore.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	rows, err := b.pool.Query(ctx, b.wfq("dependencies"), id)
	if err != nil {
		return nil, fmt.Errorf("read dependencies of job %d: %w", id, err)
	}
	defer rows.Close()
	out := []backend.DependencyOutput{}
	for rows.Next() {
		var (
			d     backend.DependencyOutput
			state string
			o     []byte
		)
		if err := rows.Scan(&d.JobID, &d.Task, &state, &o); err != nil {
			return nil, fmt.Errorf("read dependencies of job %d: %w", id, err)
		}
		d.State = backend.State(state)
		if o != nil {
			d.Output = json.RawMessage(o)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// addMembers inserts jobs as members of batch id in tx and counts them.
func (b *Backend) addMembers(ctx context.Context, tx DBTX, id int64, jobs []*backend.JobInsertParams) ([]int64, []bool, int, error) {
	rows := make([]taskRow, len(jobs))
	for i, j := range jobs {
		rows[i] = taskRow{job: j, hasDeps: true}
	}
	ids, dups, err := b.insertTasks(ctx, tx, rows, 0, id)
	if err != nil {
		return nil, nil, 0, err
	}
	n := len(ids)
	for _, d := range dups {
		if d {
			n--
		}
	}
	if _, err := tx.Exec(ctx, b.wfq("batchTotal"), id, n); err != nil {
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
		if err := tx.QueryRow(ctx, b.wfq("batchInsert"), p.Name, p.Sealed).Scan(&res.ID); err != nil {
			return err
		}
		var cbs [3]int64
		for i, cb := range []*backend.JobInsertParams{p.Callbacks.OnSuccess, p.Callbacks.OnFailure, p.Callbacks.OnComplete} {
			if cb == nil {
				continue
			}
			ids, _, err := b.insertTasks(ctx, tx, []taskRow{{job: cb, waits: true, deps: 1, callback: true}}, 0, res.ID)
			if err != nil {
				return err
			}
			cbs[i] = ids[0]
		}
		if _, err := tx.Exec(ctx, b.wfq("batchCallbacks"), res.ID, cbs[0], cbs[1], cbs[2]); err != nil {
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
		switch err := tx.QueryRow(ctx, b.wfq("batchLock"), p.ID).Scan(&sealed); {
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
		if err := tx.QueryRow(ctx, b.wfq("batchSeal"), id).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return backend.ErrBatchNotFound
			}
			return err
		}
		if err := b.finishBatch(ctx, tx, id, &wake); err != nil {
			return err
		}
		var err error
		bt, err = scanBatch(tx.QueryRow(ctx, b.wfq("batchGet"), id))
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
	bt, err := scanBatch(b.pool.QueryRow(ctx, b.wfq("batchGet"), id))
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
	rows, err := b.pool.Query(ctx, b.wfq("batchList"), p.BeforeID, limit)
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
	rows, err := b.pool.Query(ctx, b.wfq("batchMemberList"), p.ID, p.AfterID, limit)
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
		rows, err := tx.Query(ctx, b.wfq("unsettled"))
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
		return b.settle(ctx, tx, ids, &wake)
	})
	if err != nil {
		return fmt.Errorf("settle dependents: %w", err)
	}
	return b.announce(ctx, b.pool, wake)
}
