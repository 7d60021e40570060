package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// Workflows and batches (docs/workflows.md). JobFinishMany locks the rows
// it finishes and reads has_dependents with their leases; the outcomes of
// jobs with dependents are written with the rest (never deleted: their
// dependents read them) and settled in the same transaction. MySQL has no
// RETURNING for UPDATE, so settling locks the rows it reads (parents,
// then dependents in id order) and decides in Go.

var _ backend.WorkflowStore = (*Backend)(nil)

// wf fills {{db}}, the quoted database, into a statement of this file.
func (b *Backend) wf(q string) string { return strings.ReplaceAll(q, "{{db}}", quoteIdent(b.database)) }

// settle writes, in tx, the final states of the jobs ids that have
// dependents (others are skipped) to what waits for them: workflow
// dependents count them or are cancelled (and settled in turn), batches
// count their members and release their callbacks once final.
func (b *Backend) settle(ctx context.Context, tx DBTX, ids []int64) error {
	for len(ids) > 0 {
		slices.Sort(ids)
		rows, err := tx.QueryContext(ctx, b.wf(`SELECT id, state, coalesce(batch_id, 0) FROM {{db}}.spool_jobs
WHERE has_dependents = 1 AND state IN ('completed', 'discarded', 'cancelled') AND id IN `)+inList(ids)+` ORDER BY id FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		ok := map[int64]bool{}
		var parents, order []int64
		counts := map[int64]*[3]int{}
		for rows.Next() {
			var (
				id, batch int64
				state     string
			)
			if err := rows.Scan(&id, &state, &batch); err != nil {
				rows.Close()
				return fmt.Errorf("settle dependents: %w", err)
			}
			parents = append(parents, id)
			ok[id] = backend.State(state) == backend.StateCompleted
			if batch != 0 {
				c := counts[batch]
				if c == nil {
					c = &[3]int{}
					counts[batch] = c
					order = append(order, batch)
				}
				switch backend.State(state) {
				case backend.StateCompleted:
					c[0]++
				case backend.StateDiscarded:
					c[1]++
				default:
					c[2]++
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		ids = nil
		if len(parents) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET has_dependents = 0 WHERE id IN `)+inList(parents)); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_job_keys SET has_dependents = 0 WHERE job_id IN `)+inList(parents)); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		// Each dependent: how many of its parents finished, and whether
		// one that failed cancels it.
		rows, err = tx.QueryContext(ctx, b.wf(`SELECT parent_id, child_id, on_fail FROM {{db}}.spool_deps WHERE parent_id IN `)+inList(parents))
		if err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		type tally struct {
			n    int
			fail bool
		}
		children := map[int64]*tally{}
		for rows.Next() {
			var (
				p, c int64
				on   int
			)
			if err := rows.Scan(&p, &c, &on); err != nil {
				rows.Close()
				return fmt.Errorf("settle dependents: %w", err)
			}
			t := children[c]
			if t == nil {
				t = &tally{}
				children[c] = t
			}
			t.n++
			t.fail = t.fail || (!ok[p] && on == int(backend.DepFailCancel))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		if len(children) > 0 {
			cids := make([]int64, 0, len(children))
			for c := range children {
				cids = append(cids, c)
			}
			slices.Sort(cids)
			rows, err = tx.QueryContext(ctx, b.wf(`SELECT id, deps_left FROM {{db}}.spool_jobs WHERE state = 'waiting' AND id IN `)+inList(cids)+` ORDER BY id FOR UPDATE`)
			if err != nil {
				return fmt.Errorf("settle dependents: %w", err)
			}
			var cancel, release []int64
			left := map[int][]int64{} // still waiting, by how many fewer
			for rows.Next() {
				var (
					id   int64
					deps int
				)
				if err := rows.Scan(&id, &deps); err != nil {
					rows.Close()
					return fmt.Errorf("settle dependents: %w", err)
				}
				switch t := children[id]; {
				case t.fail:
					cancel = append(cancel, id)
				case deps-t.n <= 0:
					release = append(release, id)
				default:
					left[t.n] = append(left[t.n], id)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("settle dependents: %w", err)
			}
			if len(cancel) > 0 {
				if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET state = 'cancelled', finalized_at = UTC_TIMESTAMP(6), wait_kind = NULL,
  errors = JSON_ARRAY_APPEND(COALESCE(errors, JSON_ARRAY()), '$', JSON_OBJECT('attempt', attempt, 'at', `+nowJSON+`,
    'error', 'cancelled: a dependency ended discarded or cancelled'))
WHERE id IN `)+inList(cancel)); err != nil {
					return fmt.Errorf("settle dependents: %w", err)
				}
				ids = cancel
			}
			if len(release) > 0 {
				if err := b.release(ctx, tx, release); err != nil {
					return err
				}
			}
			for n, group := range left {
				if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET deps_left = deps_left - ? WHERE id IN `)+inList(group), n); err != nil {
					return fmt.Errorf("settle dependents: %w", err)
				}
			}
		}
		for _, id := range order {
			c := counts[id]
			if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_batches SET completed = completed + ?, discarded = discarded + ?, cancelled = cancelled + ? WHERE id = ?`), c[0], c[1], c[2], id); err != nil {
				return fmt.Errorf("count batch %d: %w", id, err)
			}
			if err := b.finishBatch(ctx, tx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// release makes waiting jobs pending (their run_at kept, or now if later).
// Their queues are noted in ctx's releasedQueues, if any, to be announced
// after the commit: Listen watches new ids, which a released job is not.
func (b *Backend) release(ctx context.Context, tx DBTX, ids []int64) error {
	_, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET deps_left = 0, wait_kind = NULL,
  state = IF(run_at > UTC_TIMESTAMP(6), 'scheduled', 'available')
WHERE state = 'waiting' AND id IN `)+inList(ids))
	if err != nil {
		return fmt.Errorf("release waiting jobs: %w", err)
	}
	if rq, ok := ctx.Value(releasedKey{}).(*releasedQueues); ok {
		rows, err := tx.QueryContext(ctx, b.wf(`SELECT DISTINCT queue FROM {{db}}.spool_jobs WHERE id IN `)+inList(ids))
		if err != nil {
			return fmt.Errorf("release waiting jobs: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return fmt.Errorf("release waiting jobs: %w", err)
			}
			rq.queues[q] = struct{}{}
		}
		return rows.Err()
	}
	return nil
}

// releasedKey carries a *releasedQueues in a context.
type releasedKey struct{}

// releasedQueues collects the queues of jobs a transaction released.
type releasedQueues struct{ queues map[string]struct{} }

// withReleased returns ctx collecting released queues, and the collector.
func withReleased(ctx context.Context) (context.Context, *releasedQueues) {
	rq := &releasedQueues{queues: map[string]struct{}{}}
	return context.WithValue(ctx, releasedKey{}, rq), rq
}

// announce wakes this process's listeners for the queues of rq (after the
// commit that released them); other processes find them by their poll.
func (b *Backend) announce(rq *releasedQueues) {
	if len(rq.queues) > 0 {
		b.released.PublishQueues(rq.queues)
	}
}

// finishBatch finishes batch id if it is sealed and every member is final,
// once (the batch row is locked, finished_at guards): callbacks whose
// condition holds become pending, the others are deleted.
func (b *Backend) finishBatch(ctx context.Context, tx DBTX, id int64) error {
	var failed, onSuccess, onFailure, onComplete int64
	err := tx.QueryRowContext(ctx, b.wf(`SELECT discarded + cancelled, coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)
FROM {{db}}.spool_batches WHERE id = ? AND sealed = 1 AND finished_at IS NULL AND completed + discarded + cancelled >= total FOR UPDATE`), id).
		Scan(&failed, &onSuccess, &onFailure, &onComplete)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish batch %d: %w", id, err)
	}
	keep := [3]int64{onSuccess, onFailure, onComplete}
	var run []int64
	for i, cb := range keep {
		if cb == 0 {
			continue
		}
		if runs := i == 2 || (i == 0) == (failed == 0); !runs {
			if _, err := tx.ExecContext(ctx, b.wf(`DELETE FROM {{db}}.spool_jobs WHERE id = ? AND state = 'waiting'`), cb); err != nil {
				return fmt.Errorf("finish batch %d: %w", id, err)
			}
			keep[i] = 0
			continue
		}
		run = append(run, cb)
	}
	if len(run) > 0 {
		if err := b.release(ctx, tx, run); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_batches SET finished_at = UTC_TIMESTAMP(6),
  on_success = NULLIF(?, 0), on_failure = NULLIF(?, 0), on_complete = NULLIF(?, 0) WHERE id = ?`), keep[0], keep[1], keep[2], id)
	if err != nil {
		return fmt.Errorf("finish batch %d: %w", id, err)
	}
	return nil
}

// insertJobs inserts jobs in db (a transaction) and returns their ids, in
// order; a unique job whose key is held reports its holder (dups).
func (b *Backend) insertJobs(ctx context.Context, db DBTX, jobs []*backend.JobInsertParams) ([]int64, []bool, error) {
	if len(jobs) == 0 {
		return []int64{}, nil, nil
	}
	rows := make([]insertRow, len(jobs))
	for i, j := range jobs {
		var err error
		if rows[i], err = b.encodeInsert(j); err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
	}
	if backend.AnyUnique(jobs) {
		return b.insertUnique(ctx, db, jobs, rows)
	}
	ids := make([]int64, 0, len(rows))
	for _, c := range b.chunkInserts(rows) {
		first, err := b.insertChunk(ctx, db, c)
		if err != nil {
			return nil, nil, err
		}
		for i := range c {
			ids = append(ids, first+int64(i)*b.server.autoIncStep)
		}
	}
	return ids, nil, nil
}

// jsonRows renders rows of values as a JSON array of arrays.
func jsonRows(rows [][]any) (string, error) {
	out, err := json.Marshal(rows)
	return string(out), err
}

// updateChunk is how many rows one JSON_TABLE update or insert carries.
const updateChunk = 5000

// WorkflowInsert implements backend.WorkflowStore.
func (b *Backend) WorkflowInsert(ctx context.Context, p *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	jobs := make([]*backend.JobInsertParams, len(p.Tasks))
	hasDeps := make([]bool, len(p.Tasks))
	for i, t := range p.Tasks {
		jobs[i] = t.Job
		for _, d := range t.Deps {
			hasDeps[d.Task] = true
		}
	}
	res := &backend.WorkflowInsertResult{}
	run := func(tx DBTX) error {
		r, err := tx.ExecContext(ctx, b.wf(`INSERT INTO {{db}}.spool_workflows (name, created_at, tasks) VALUES (?, UTC_TIMESTAMP(6), ?)`), p.Name, len(p.Tasks))
		if err != nil {
			return err
		}
		if res.ID, err = r.LastInsertId(); err != nil {
			return err
		}
		ids, dups, err := b.insertJobs(ctx, tx, jobs)
		if err != nil {
			return err
		}
		for i, d := range dups {
			if d {
				return fmt.Errorf("task %q: %w", p.Tasks[i].Name, backend.ErrUniqueConflict)
			}
		}
		res.IDs = ids
		var tasks, edges [][]any
		for i, t := range p.Tasks {
			tasks = append(tasks, []any{ids[i], t.Name, len(t.Deps), b2i(hasDeps[i])})
			for _, d := range t.Deps {
				edges = append(edges, []any{ids[d.Task], ids[i], int(d.OnFail)})
			}
		}
		for c := range slices.Chunk(tasks, updateChunk) {
			js, err := jsonRows(c)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs j
JOIN JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$[0]', task VARCHAR(128) CHARACTER SET utf8mb4 PATH '$[1]',
  deps INT PATH '$[2]', hd TINYINT PATH '$[3]')) t ON j.id = t.id
SET j.workflow_id = ?, j.workflow_task = t.task, j.deps_left = t.deps, j.has_dependents = t.hd,
  j.state = IF(t.deps > 0, 'waiting', j.state), j.wait_kind = IF(t.deps > 0, 'deps', NULL)`), js, res.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, b.wf(`INSERT INTO {{db}}.spool_job_keys (job_id, has_dependents, workflow_id)
SELECT t.id, t.hd, ? FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$[0]', hd TINYINT PATH '$[3]')) t`), res.ID, js); err != nil {
				return err
			}
		}
		for c := range slices.Chunk(edges, updateChunk) {
			js, err := jsonRows(c)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, b.wf(`INSERT INTO {{db}}.spool_deps (parent_id, child_id, on_fail)
SELECT t.p, t.c, t.f FROM JSON_TABLE(?, '$[*]' COLUMNS (p BIGINT PATH '$[0]', c BIGINT PATH '$[1]', f TINYINT PATH '$[2]')) t`), js); err != nil {
				return err
			}
		}
		return nil
	}
	err = b.writeIn(ctx, callerTx, run)
	if err != nil {
		if missingObject(err) {
			return nil, backend.ExplainMissingObject(ctx, b, fmt.Errorf("insert workflow: %w", err))
		}
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	return res, nil
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// workflowTaskIDs reads a workflow's task ids (param: its id), in id
// order, from spool_job_keys (schema 20: spool_jobs has no index on
// workflow_id).
const workflowTaskIDs = `SELECT job_id FROM {{db}}.spool_job_keys WHERE workflow_id = ? ORDER BY job_id`

// workflowEdges reads a workflow's edges (param: its id) from its tasks
// (STRAIGHT_JOIN): joined the other way, the server read every edge.
const workflowEdges = `SELECT d.parent_id, d.child_id, d.on_fail FROM {{db}}.spool_job_keys k
STRAIGHT_JOIN {{db}}.spool_deps d ON d.child_id = k.job_id WHERE k.workflow_id = ?`

// WorkflowList implements backend.WorkflowStore.
func (b *Backend) WorkflowList(ctx context.Context, p *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	// The tasks' counts by state: each page's workflows, their tasks from
	// spool_job_keys' workflow index, each task's state from its row.
	rows, err := b.db.QueryContext(ctx, b.wf(`SELECT w.id, w.name, w.created_at, w.tasks, coalesce(j.state, '') AS st, count(j.id)
FROM (SELECT id, name, created_at, tasks FROM {{db}}.spool_workflows WHERE ? = 0 OR id < ? ORDER BY id DESC LIMIT ?) w
LEFT JOIN {{db}}.spool_job_keys k ON k.workflow_id = w.id
LEFT JOIN {{db}}.spool_jobs j ON j.id = k.job_id
GROUP BY w.id, w.name, w.created_at, w.tasks, j.state
ORDER BY w.id DESC`), p.BeforeID, p.BeforeID, limit)
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
	err := b.db.QueryRowContext(ctx, b.wf(`SELECT id, name, created_at, tasks FROM {{db}}.spool_workflows WHERE id = ?`), id).
		Scan(&d.ID, &d.Name, &d.CreatedAt, &d.Tasks)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	rows, err := b.db.QueryContext(ctx, b.wf(`SELECT `+jobColumns+` FROM (`+workflowTaskIDs+`) k
JOIN {{db}}.spool_jobs ON id = k.job_id ORDER BY id`), id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	d.Counts = map[backend.State]int64{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		d.Jobs = append(d.Jobs, j)
		d.Counts[j.State]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	d.Tasks = len(d.Jobs)
	rows, err = b.db.QueryContext(ctx, b.wf(workflowEdges), id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e  backend.WorkflowEdge
			on int
		)
		if err := rows.Scan(&e.Parent, &e.Child, &on); err != nil {
			return nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		e.OnFail = backend.DepFail(on)
		d.Edges = append(d.Edges, e)
	}
	return d, rows.Err()
}

// lockWorkflow locks workflow id's row in tx, or returns
// ErrWorkflowNotFound: its cancel and its retry run one at a time.
func (b *Backend) lockWorkflow(ctx context.Context, tx *sql.Tx, id int64) error {
	var one int64
	err := tx.QueryRowContext(ctx, b.wf(`SELECT id FROM {{db}}.spool_workflows WHERE id = ? FOR UPDATE`), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return backend.ErrWorkflowNotFound
	}
	return err
}

// lockTasks locks in tx, in id order, the tasks of workflow id whose row
// matches cond (a clause starting with AND, or ""), and returns their ids
// and states. The ids come from spool_job_keys by a plain read, then the
// rows are locked by primary key: a locking read through the side table
// would lock its rows before the jobs', the reverse of a delete of a task
// (the job, then its side row by the foreign key). The caller holds the
// workflow's lock, and a workflow gains no task after its insert, so the
// ids read are all its tasks.
func (b *Backend) lockTasks(ctx context.Context, tx *sql.Tx, id int64, cond string) ([]int64, []backend.State, error) {
	all, err := queryIDs(ctx, tx, b.wf(workflowTaskIDs), id)
	if err != nil || len(all) == 0 {
		return nil, nil, err
	}
	rows, err := tx.QueryContext(ctx, b.wf(`SELECT id, state FROM {{db}}.spool_jobs WHERE id IN `)+inList(all)+cond+` ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		ids    []int64
		states []backend.State
	)
	for rows.Next() {
		var (
			j     int64
			state string
		)
		if err := rows.Scan(&j, &state); err != nil {
			return nil, nil, err
		}
		ids, states = append(ids, j), append(states, backend.State(state))
	}
	return ids, states, rows.Err()
}

// WorkflowCancel implements backend.WorkflowStore.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	n := 0
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		if err := b.lockWorkflow(ctx, tx, id); err != nil {
			return err
		}
		ids, states, err := b.lockTasks(ctx, tx, id, ` AND state NOT IN ('completed', 'discarded', 'cancelled')`)
		if err != nil || len(ids) == 0 {
			return err
		}
		var running []int64
		for i, j := range ids {
			if states[i] == backend.StateRunning {
				running = append(running, j)
			}
		}
		for _, j := range running {
			if err := b.recordCancel(ctx, tx, j); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET state = 'cancelled', finalized_at = UTC_TIMESTAMP(6),
  wait_kind = NULL WHERE id IN `)+inList(ids)); err != nil {
			return err
		}
		n = len(ids)
		return b.settle(ctx, tx, ids)
	})
	if err != nil {
		return 0, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	return n, nil
}

// WorkflowRetry implements backend.WorkflowStore. The tasks are locked in
// id order; those that wait for as many retried dependencies (and are
// depended on alike) change in one statement.
func (b *Backend) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	n := 0
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		n = 0
		if err := b.lockWorkflow(ctx, tx, id); err != nil {
			return err
		}
		ids, list, err := b.lockTasks(ctx, tx, id, "")
		if err != nil {
			return err
		}
		states := make(map[int64]backend.State, len(ids))
		for i, j := range ids {
			states[j] = list[i]
		}
		rows, err := tx.QueryContext(ctx, b.wf(workflowEdges), id)
		if err != nil {
			return err
		}
		var edges []backend.WorkflowEdge
		for rows.Next() {
			var e backend.WorkflowEdge
			if err := rows.Scan(&e.Parent, &e.Child, &e.OnFail); err != nil {
				rows.Close()
				return err
			}
			edges = append(edges, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		plan, err := backend.PlanWorkflowRetry(states, edges)
		if err != nil {
			return err
		}
		type shape struct {
			deps int
			has  bool
		}
		groups := map[shape][]int64{}
		var order []shape
		for _, t := range plan {
			k := shape{t.DepsLeft, t.HasDependents}
			if groups[k] == nil {
				order = append(order, k)
			}
			groups[k] = append(groups[k], t.ID)
		}
		for _, k := range order {
			set := `state = 'available', wait_kind = NULL, run_at = UTC_TIMESTAMP(6)`
			if k.deps > 0 {
				set = `state = 'waiting', wait_kind = 'deps'`
			}
			for c := range slices.Chunk(groups[k], updateChunk) {
				res, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET `+set+`, attempt = 0, finalized_at = `+neverTime+`,
  deps_left = ?, has_dependents = ? WHERE state IN ('discarded', 'cancelled') AND id IN `)+inList(c), k.deps, k.has)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_job_keys k JOIN {{db}}.spool_jobs j ON j.id = k.job_id
SET k.has_dependents = j.has_dependents WHERE k.job_id IN `)+inList(c)); err != nil {
					return err
				}
				m, _ := res.RowsAffected()
				n += int(m)
			}
		}
		return nil
	})
	if isUniqueViolation(err) {
		err = backend.ErrUniqueConflict
	}
	if err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	return n, nil
}

// JobDependencies implements backend.WorkflowStore.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	rows, err := b.db.QueryContext(ctx, b.wf(`SELECT p.id, coalesce(p.workflow_task, ''), p.state, p.output
FROM {{db}}.spool_deps d JOIN {{db}}.spool_jobs p ON p.id = d.parent_id WHERE d.child_id = ? ORDER BY p.id`), id)
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

// addMembers inserts jobs into batch id (callback: as its waiting
// callbacks) in tx, and counts the members.
func (b *Backend) addMembers(ctx context.Context, tx DBTX, id int64, jobs []*backend.JobInsertParams, callback bool) ([]int64, []bool, int, error) {
	ids, dups, err := b.insertJobs(ctx, tx, jobs)
	if err != nil || len(ids) == 0 {
		return ids, dups, 0, err
	}
	fresh := make([]int64, 0, len(ids))
	for i, j := range ids {
		if dups == nil || !dups[i] {
			fresh = append(fresh, j)
		}
	}
	if len(fresh) > 0 {
		set := `batch_id = ?, has_dependents = 1`
		if callback {
			set = `batch_id = ?, state = 'waiting', wait_kind = 'deps', deps_left = 1`
		}
		for c := range slices.Chunk(fresh, updateChunk) {
			if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_jobs SET `+set+` WHERE id IN `)+inList(c), id); err != nil {
				return nil, nil, 0, err
			}
			// The side rows copy what the UPDATE just wrote (a member has
			// dependents, its callbacks; a callback none).
			if _, err := tx.ExecContext(ctx, b.wf(`INSERT INTO {{db}}.spool_job_keys (job_id, has_dependents, batch_id)
SELECT id, has_dependents, batch_id FROM {{db}}.spool_jobs WHERE id IN `)+inList(c)); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	if !callback {
		if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_batches SET total = total + ? WHERE id = ?`), len(fresh), id); err != nil {
			return nil, nil, 0, err
		}
	}
	return ids, dups, len(fresh), nil
}

// BatchInsert implements backend.WorkflowStore.
func (b *Backend) BatchInsert(ctx context.Context, p *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	res := &backend.BatchInsertResult{}
	run := func(tx DBTX) error {
		r, err := tx.ExecContext(ctx, b.wf(`INSERT INTO {{db}}.spool_batches (name, created_at, sealed) VALUES (?, UTC_TIMESTAMP(6), ?)`), p.Name, p.Sealed)
		if err != nil {
			return err
		}
		if res.ID, err = r.LastInsertId(); err != nil {
			return err
		}
		var cbs [3]int64
		for i, cb := range []*backend.JobInsertParams{p.Callbacks.OnSuccess, p.Callbacks.OnFailure, p.Callbacks.OnComplete} {
			if cb == nil {
				continue
			}
			ids, _, _, err := b.addMembers(ctx, tx, res.ID, []*backend.JobInsertParams{cb}, true)
			if err != nil {
				return err
			}
			cbs[i] = ids[0]
		}
		if _, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_batches SET on_success = NULLIF(?, 0), on_failure = NULLIF(?, 0), on_complete = NULLIF(?, 0) WHERE id = ?`),
			cbs[0], cbs[1], cbs[2], res.ID); err != nil {
			return err
		}
		if res.IDs, res.Duplicates, _, err = b.addMembers(ctx, tx, res.ID, p.Jobs, false); err != nil {
			return err
		}
		return b.finishBatch(ctx, tx, res.ID)
	}
	err = b.writeIn(ctx, callerTx, run)
	if err != nil {
		if missingObject(err) {
			return nil, backend.ExplainMissingObject(ctx, b, fmt.Errorf("insert batch: %w", err))
		}
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	return res, nil
}

// BatchAdd implements backend.WorkflowStore.
func (b *Backend) BatchAdd(ctx context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	res := &backend.JobInsertManyResult{}
	run := func(tx DBTX) error {
		var sealed bool
		switch err := tx.QueryRowContext(ctx, b.wf(`SELECT sealed FROM {{db}}.spool_batches WHERE id = ? FOR UPDATE`), p.ID).Scan(&sealed); {
		case errors.Is(err, sql.ErrNoRows):
			return backend.ErrBatchNotFound
		case err != nil:
			return err
		case sealed:
			return backend.ErrBatchSealed
		}
		var err error
		res.IDs, res.Duplicates, res.Count, err = b.addMembers(ctx, tx, p.ID, p.Jobs, false)
		return err
	}
	err = b.writeIn(ctx, callerTx, run)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	return res, nil
}

const batchColumns = `id, name, created_at, sealed, total, completed, discarded, cancelled, finished_at,
  coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)`

func scanBatch(row scanner) (*backend.Batch, error) {
	var (
		bt       backend.Batch
		finished sql.NullTime
	)
	if err := row.Scan(&bt.ID, &bt.Name, &bt.CreatedAt, &bt.Sealed, &bt.Total, &bt.Completed, &bt.Discarded, &bt.Cancelled,
		&finished, &bt.OnSuccess, &bt.OnFailure, &bt.OnComplete); err != nil {
		return nil, err
	}
	bt.FinishedAt = storedTime(finished)
	return &bt, nil
}

// BatchSeal implements backend.WorkflowStore.
func (b *Backend) BatchSeal(ctx context.Context, id int64) (*backend.Batch, error) {
	var bt *backend.Batch
	ctx, rq := withReleased(ctx)
	defer b.announce(rq)
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, b.wf(`UPDATE {{db}}.spool_batches SET sealed = 1 WHERE id = ?`), id)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			var one int64
			if err := tx.QueryRowContext(ctx, b.wf(`SELECT id FROM {{db}}.spool_batches WHERE id = ?`), id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return backend.ErrBatchNotFound
			}
		}
		if err := b.finishBatch(ctx, tx, id); err != nil {
			return err
		}
		bt, err = scanBatch(tx.QueryRowContext(ctx, b.wf(`SELECT `+batchColumns+` FROM {{db}}.spool_batches WHERE id = ?`), id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seal batch %d: %w", id, err)
	}
	return bt, nil
}

// BatchGet implements backend.WorkflowStore.
func (b *Backend) BatchGet(ctx context.Context, id int64) (*backend.Batch, error) {
	bt, err := scanBatch(b.db.QueryRowContext(ctx, b.wf(`SELECT `+batchColumns+` FROM {{db}}.spool_batches WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := b.db.QueryContext(ctx, b.wf(`SELECT `+batchColumns+` FROM {{db}}.spool_batches WHERE ? = 0 OR id < ? ORDER BY id DESC LIMIT ?`), p.BeforeID, p.BeforeID, limit)
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
	bt, err := b.BatchGet(ctx, p.ID)
	if err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	// The batch's range of spool_job_keys_batch, in id order, without its
	// callbacks.
	rows, err := b.db.QueryContext(ctx, b.wf(`SELECT `+jobColumns+` FROM (SELECT job_id AS mid FROM {{db}}.spool_job_keys FORCE INDEX (spool_job_keys_batch)
WHERE batch_id = ? AND job_id > ? AND job_id NOT IN (?, ?, ?) ORDER BY job_id LIMIT ?) u
JOIN {{db}}.spool_jobs ON id = u.mid ORDER BY id`),
		p.ID, p.AfterID, bt.OnSuccess, bt.OnFailure, bt.OnComplete, limit)
	if err != nil {
		return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
	}
	defer rows.Close()
	var out []*backend.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list members of batch %d: %w", p.ID, err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// settleStray settles, in tx, jobs with dependents that a write outside a
// finish left final but unsettled; the leader runs it with each rescue.
func (b *Backend) settleStray(ctx context.Context, tx DBTX) error {
	ids, err := queryIDs(ctx, tx, b.wf(`SELECT j.id FROM {{db}}.spool_job_keys k JOIN {{db}}.spool_jobs j ON j.id = k.job_id
WHERE k.has_dependents = 1 AND j.state IN ('completed', 'discarded', 'cancelled') LIMIT 1000`))
	if err != nil {
		return fmt.Errorf("settle dependents: %w", err)
	}
	return b.settle(ctx, tx, ids)
}

// pruneWorkflows deletes edges whose child is gone, workflows with no task
// left and finished batches with no job left.
func (b *Backend) pruneWorkflows(ctx context.Context) error {
	for _, q := range []string{
		`DELETE d FROM {{db}}.spool_deps d LEFT JOIN {{db}}.spool_jobs j ON j.id = d.child_id WHERE j.id IS NULL`,
		// A workflow's or batch's jobs are its rows of spool_job_keys, which
		// the foreign key deletes with them.
		`DELETE w FROM {{db}}.spool_workflows w
LEFT JOIN {{db}}.spool_job_keys k ON k.workflow_id = w.id
WHERE k.job_id IS NULL AND w.created_at < UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE`,
		`DELETE bt FROM {{db}}.spool_batches bt
LEFT JOIN {{db}}.spool_job_keys k ON k.batch_id = bt.id
WHERE bt.finished_at IS NOT NULL AND k.job_id IS NULL`,
	} {
		if _, err := b.db.ExecContext(ctx, b.wf(q)); err != nil {
			return fmt.Errorf("clean up workflows and batches: %w", err)
		}
	}
	return nil
}
