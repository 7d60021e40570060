package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqltext"
)

// wfStatements are the statements of workflows and batches, one file each
// in sql/workflow/.
type wfStatements struct {
	settleParents, settleChildren, batchCount, batchFinish, release, dropCallback string
	workflowInsert, workflowTasks, depsInsert, workflowSummary, workflowGet       string
	workflowJobs, workflowEdges, workflowCancel, dependencies                     string
	batchInsert, batchCallbacks, batchMembers, batchTotal, batchLock, batchSeal   string
	batchGet, batchList, batchMemberList, prune                                   string
	workflowStates, workflowRetry                                                 string
}

// batchColumns is the column list scanBatch reads.
const batchColumns = `id, name, created_at, sealed, total, completed, discarded, cancelled, finished_at,
  coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)`

//go:embed sql/workflow/*.sql
var wfFiles embed.FS

var wfStmt = func() wfStatements {
	var s wfStatements
	r := strings.NewReplacer("{{cols}}", jobColumns, "{{batch_cols}}", batchColumns)
	err := sqltext.Load(wfFiles, "sql/workflow", r, map[string]*string{
		"settle_parents": &s.settleParents, "settle_children": &s.settleChildren, "batch_count": &s.batchCount,
		"batch_finish": &s.batchFinish, "release": &s.release, "drop_callback": &s.dropCallback,
		"workflow_insert": &s.workflowInsert, "workflow_tasks": &s.workflowTasks, "deps_insert": &s.depsInsert,
		"workflow_summary": &s.workflowSummary, "workflow_get": &s.workflowGet, "workflow_jobs": &s.workflowJobs,
		"workflow_edges": &s.workflowEdges, "workflow_cancel": &s.workflowCancel, "dependencies": &s.dependencies,
		"batch_insert": &s.batchInsert, "batch_callbacks": &s.batchCallbacks, "batch_members": &s.batchMembers,
		"batch_total": &s.batchTotal, "batch_lock": &s.batchLock, "batch_seal": &s.batchSeal,
		"batch_get": &s.batchGet, "batch_list": &s.batchList, "batch_member_list": &s.batchMemberList,
		"prune": &s.prune, "workflow_states": &s.workflowStates, "workflow_retry": &s.workflowRetry,
	})
	if err != nil {
		panic("spool sqlite: " + err.Error())
	}
	return s
}()

var _ backend.WorkflowStore = (*Backend)(nil)

// jsonInts renders ids as a JSON array.
func jsonInts(ids []int64) string {
	buf := make([]byte, 0, len(ids)*8+2)
	buf = append(buf, '[')
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, id, 10)
	}
	return string(append(buf, ']'))
}

// settle writes, in tx, the final states of the jobs ids that have
// dependents (others are skipped) to what waits for them: workflow
// dependents count them or are cancelled (and settled in turn), batches
// count their members and release their callbacks once final. It adds the
// queues of the jobs it made available to wake.
func settle(ctx context.Context, tx *sql.Tx, ids []int64, wake map[string]struct{}) error {
	now := time.Now()
	for len(ids) > 0 {
		rows, err := tx.QueryContext(ctx, wfStmt.settleParents, jsonInts(ids))
		if err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		var parents []string
		type count struct{ completed, discarded, cancelled int }
		batches := map[int64]*count{}
		var order []int64
		for rows.Next() {
			var (
				id, batch int64
				state     string
			)
			if err := rows.Scan(&id, &state, &batch); err != nil {
				rows.Close()
				return fmt.Errorf("settle dependents: %w", err)
			}
			ok := 0
			if backend.State(state) == backend.StateCompleted {
				ok = 1
			}
			parents = append(parents, "["+strconv.FormatInt(id, 10)+","+strconv.Itoa(ok)+"]")
			if batch != 0 {
				c := batches[batch]
				if c == nil {
					c = &count{}
					batches[batch] = c
					order = append(order, batch)
				}
				switch backend.State(state) {
				case backend.StateCompleted:
					c.completed++
				case backend.StateDiscarded:
					c.discarded++
				default:
					c.cancelled++
				}
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		ids = ids[:0:0]
		if len(parents) == 0 {
			return nil
		}
		rows, err = tx.QueryContext(ctx, wfStmt.settleChildren, now.UnixMicro(), "["+strings.Join(parents, ",")+"]", now.UTC().Format(time.RFC3339Nano))
		if err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		for rows.Next() {
			var (
				id           int64
				state, queue string
			)
			if err := rows.Scan(&id, &state, &queue); err != nil {
				rows.Close()
				return fmt.Errorf("settle dependents: %w", err)
			}
			switch backend.State(state) {
			case backend.StateCancelled:
				ids = append(ids, id) // its own dependents, next round
			case backend.StateAvailable:
				wake[queue] = struct{}{}
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("settle dependents: %w", err)
		}
		for _, id := range order {
			c := batches[id]
			if _, err := tx.ExecContext(ctx, wfStmt.batchCount, id, c.completed, c.discarded, c.cancelled); err != nil {
				return fmt.Errorf("count batch %d: %w", id, err)
			}
			if err := finishBatch(ctx, tx, id, now, wake); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishBatch finishes batch id if it is sealed and every member is final,
// once: its callbacks whose condition holds become pending, the others are
// deleted.
func finishBatch(ctx context.Context, tx *sql.Tx, id int64, now time.Time, wake map[string]struct{}) error {
	var failed, onSuccess, onFailure, onComplete int64
	err := tx.QueryRowContext(ctx, wfStmt.batchFinish, id, now.UnixMicro()).Scan(&failed, &onSuccess, &onFailure, &onComplete)
	if errors.Is(err, sql.ErrNoRows) {
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
		runs := i == 2 || (i == 0) == (failed == 0)
		if !runs {
			if _, err := tx.ExecContext(ctx, wfStmt.dropCallback, cb); err != nil {
				return fmt.Errorf("finish batch %d: %w", id, err)
			}
			keep[i] = 0
			continue
		}
		var queue string
		switch err := tx.QueryRowContext(ctx, wfStmt.release, cb, now.UnixMicro()).Scan(&queue); {
		case err == nil:
			wake[queue] = struct{}{}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("finish batch %d: %w", id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, wfStmt.batchCallbacks, id, keep[0], keep[1], keep[2]); err != nil {
		return fmt.Errorf("finish batch %d: %w", id, err)
	}
	return nil
}

// insertJobsTx inserts jobs in tx, in order, and returns their ids; a
// unique job whose key is held inserts nothing and reports its holder,
// with dups true at its index.
func insertJobsTx(ctx context.Context, tx *sql.Tx, jobs []*backend.JobInsertParams, wake map[string]struct{}) (ids []int64, dups []bool, err error) {
	now := nowMicros()
	ids = make([]int64, 0, len(jobs))
	for start := 0; start < len(jobs); {
		end := start + 1
		if jobs[start].UniqueKey == "" {
			for end < len(jobs) && end-start < maxInsertRows && jobs[end].UniqueKey == "" {
				end++
			}
		}
		c, err := prepareInsert(jobs[start:end], now, wake, nil)
		if err != nil {
			return nil, nil, err
		}
		if jobs[start].UniqueKey != "" {
			var id int64
			err := tx.QueryRowContext(ctx, insertUniqueSQL, c.args...).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				if err := tx.QueryRowContext(ctx, stmt.uniqueHolder, jobs[start].UniqueKey).Scan(&id); err != nil {
					return nil, nil, fmt.Errorf("read the holder of a unique key: %w", err)
				}
				if dups == nil {
					dups = make([]bool, len(jobs))
				}
				dups[start] = true
			} else if err != nil {
				return nil, nil, err
			}
			ids = append(ids, id)
			start = end
			continue
		}
		rows, err := tx.QueryContext(ctx, c.query, c.args...)
		if err != nil {
			return nil, nil, err
		}
		first := len(ids)
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, nil, err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return nil, nil, err
		}
		if len(ids)-first != c.n {
			return nil, nil, fmt.Errorf("inserted %d of %d rows", len(ids)-first, c.n)
		}
		sortInts(ids[first:])
		start = end
	}
	return ids, dups, nil
}

func sortInts(s []int64) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// WorkflowInsert implements backend.WorkflowStore: the tasks are inserted
// as jobs, then joined to the workflow (those with dependencies waiting)
// and their edges written, in one write transaction.
func (b *Backend) WorkflowInsert(ctx context.Context, p *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	tx, err := txOf(p.Tx)
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
	wake := map[string]struct{}{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		clear(wake)
		if err := tx.QueryRowContext(ctx, wfStmt.workflowInsert, p.Name, nowMicros(), len(p.Tasks)).Scan(&res.ID); err != nil {
			return err
		}
		ids, dups, err := insertJobsTx(ctx, tx, jobs, wake)
		if err != nil {
			return err
		}
		for i, d := range dups {
			if d {
				return fmt.Errorf("task %q: %w", p.Tasks[i].Name, backend.ErrUniqueConflict)
			}
		}
		res.IDs = ids
		var tasks, edges strings.Builder
		tasks.WriteByte('[')
		edges.WriteByte('[')
		nEdges := 0
		for i, t := range p.Tasks {
			if i > 0 {
				tasks.WriteByte(',')
			}
			name, _ := json.Marshal(t.Name)
			fmt.Fprintf(&tasks, "[%d,%s,%d,%d]", ids[i], name, len(t.Deps), b2i(hasDeps[i]))
			for _, d := range t.Deps {
				if nEdges > 0 {
					edges.WriteByte(',')
				}
				fmt.Fprintf(&edges, "[%d,%d,%d]", ids[d.Task], ids[i], d.OnFail)
				nEdges++
			}
		}
		tasks.WriteByte(']')
		edges.WriteByte(']')
		if _, err := tx.ExecContext(ctx, wfStmt.workflowTasks, tasks.String(), res.ID); err != nil {
			return err
		}
		if nEdges > 0 {
			if _, err := tx.ExecContext(ctx, wfStmt.depsInsert, edges.String()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if missingObject(err) {
			return nil, backend.ExplainMissingObject(ctx, b, fmt.Errorf("insert workflow: %w", err))
		}
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	b.st.hub.PublishQueues(wake)
	return res, nil
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// WorkflowList implements backend.WorkflowStore.
func (b *Backend) WorkflowList(ctx context.Context, p *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.st.readers.QueryContext(ctx, wfStmt.workflowSummary, p.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer rows.Close()
	out, err := backend.CollectWorkflowSummaries(rows, fromMicros)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowGet implements backend.WorkflowStore.
func (b *Backend) WorkflowGet(ctx context.Context, id int64) (*backend.WorkflowDetail, error) {
	d := &backend.WorkflowDetail{Jobs: []*backend.JobRow{}, Edges: []backend.WorkflowEdge{}}
	var created int64
	err := b.st.readers.QueryRowContext(ctx, wfStmt.workflowGet, id).Scan(&d.ID, &d.Name, &created, &d.Tasks)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	d.CreatedAt = fromMicros(created)
	d.Counts = map[backend.State]int64{}
	rows, err := b.st.readers.QueryContext(ctx, wfStmt.workflowJobs, id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		d.Jobs = append(d.Jobs, j)
		d.Counts[j.State]++
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	d.Tasks = len(d.Jobs)
	rows, err = b.st.readers.QueryContext(ctx, wfStmt.workflowEdges, id)
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var e backend.WorkflowEdge
		if err := rows.Scan(&e.Parent, &e.Child, &e.OnFail); err != nil {
			return nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		d.Edges = append(d.Edges, e)
	}
	return d, rows.Err()
}

// workflowExists returns ErrWorkflowNotFound when tx finds no workflow
// id (a write transaction: nothing changes it until the commit).
func workflowExists(ctx context.Context, tx *sql.Tx, id int64) error {
	var one int
	err := tx.QueryRowContext(ctx, wfStmt.workflowGet, id).Scan(&one, new(string), new(int64), new(int))
	if errors.Is(err, sql.ErrNoRows) {
		return backend.ErrWorkflowNotFound
	}
	return err
}

// WorkflowCancel implements backend.WorkflowStore.
func (b *Backend) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	var (
		n       int
		running []int64
	)
	wake := map[string]struct{}{}
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		n, running = 0, nil
		clear(wake)
		if err := workflowExists(ctx, tx, id); err != nil {
			return err
		}
		// Running tasks are told (cancel events) before they change.
		rows, err := tx.QueryContext(ctx, `SELECT id FROM spool_jobs WHERE workflow_id = ? AND state = 'running'`, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var r int64
			if err := rows.Scan(&r); err != nil {
				rows.Close()
				return err
			}
			running = append(running, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, wfStmt.workflowCancel, nowMicros(), id)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var (
				c  int64
				ok bool
			)
			if err := rows.Scan(&c, &ok); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, c)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		n = len(ids)
		if len(running) > 0 {
			if err := recordCancels(ctx, tx, running); err != nil {
				return err
			}
		}
		return settle(ctx, tx, ids, wake)
	})
	if err != nil {
		return 0, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	for _, r := range running {
		b.st.hub.Publish(backend.Wake{CancelledID: r})
	}
	b.st.hub.PublishQueues(wake)
	return n, nil
}

// WorkflowRetry implements backend.WorkflowStore.
func (b *Backend) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	var n int
	wake := map[string]struct{}{}
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		n = 0
		clear(wake)
		if err := workflowExists(ctx, tx, id); err != nil {
			return err
		}
		states := map[int64]backend.State{}
		if err := eachRow(ctx, tx, wfStmt.workflowStates, []any{id}, func(rows *sql.Rows) error {
			var (
				tid   int64
				state string
			)
			err := rows.Scan(&tid, &state)
			states[tid] = backend.State(state)
			return err
		}); err != nil {
			return err
		}
		var edges []backend.WorkflowEdge
		if err := eachRow(ctx, tx, wfStmt.workflowEdges, []any{id}, func(rows *sql.Rows) error {
			var e backend.WorkflowEdge
			err := rows.Scan(&e.Parent, &e.Child, &e.OnFail)
			edges = append(edges, e)
			return err
		}); err != nil {
			return err
		}
		plan, err := backend.PlanWorkflowRetry(states, edges)
		if err != nil || len(plan) == 0 {
			return err
		}
		var tasks strings.Builder
		tasks.WriteByte('[')
		for i, t := range plan {
			if i > 0 {
				tasks.WriteByte(',')
			}
			fmt.Fprintf(&tasks, "[%d,%d,%d]", t.ID, t.DepsLeft, b2i(t.HasDependents))
		}
		tasks.WriteByte(']')
		return eachRow(ctx, tx, wfStmt.workflowRetry, []any{nowMicros(), tasks.String()}, func(rows *sql.Rows) error {
			var (
				queue string
				now   bool
			)
			err := rows.Scan(&queue, &now)
			n++
			if now {
				wake[queue] = struct{}{}
			}
			return err
		})
	})
	if isUniqueViolation(err) {
		err = backend.ErrUniqueConflict
	}
	if err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	b.st.hub.PublishQueues(wake)
	return n, nil
}

// eachRow runs query in tx and calls fn on each row.
func eachRow(ctx context.Context, tx *sql.Tx, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// JobDependencies implements backend.WorkflowStore.
func (b *Backend) JobDependencies(ctx context.Context, id int64) ([]backend.DependencyOutput, error) {
	rows, err := b.st.readers.QueryContext(ctx, wfStmt.dependencies, id)
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

// addMembers inserts jobs as members of batch id (callback: as its waiting
// callbacks instead) in tx.
func addMembers(ctx context.Context, tx *sql.Tx, id int64, jobs []*backend.JobInsertParams, callback bool, wake map[string]struct{}) ([]int64, []bool, int, error) {
	if len(jobs) == 0 {
		return []int64{}, nil, 0, nil
	}
	ids, dups, err := insertJobsTx(ctx, tx, jobs, wake)
	if err != nil {
		return nil, nil, 0, err
	}
	fresh := make([]int64, 0, len(ids))
	for i, jid := range ids {
		if dups == nil || !dups[i] {
			fresh = append(fresh, jid)
		}
	}
	if _, err := tx.ExecContext(ctx, wfStmt.batchMembers, jsonInts(fresh), id, callback); err != nil {
		return nil, nil, 0, err
	}
	if !callback {
		if _, err := tx.ExecContext(ctx, wfStmt.batchTotal, id, len(fresh)); err != nil {
			return nil, nil, 0, err
		}
	}
	return ids, dups, len(fresh), nil
}

// BatchInsert implements backend.WorkflowStore.
func (b *Backend) BatchInsert(ctx context.Context, p *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	res := &backend.BatchInsertResult{}
	wake := map[string]struct{}{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		clear(wake)
		if err := tx.QueryRowContext(ctx, wfStmt.batchInsert, p.Name, nowMicros(), p.Sealed).Scan(&res.ID); err != nil {
			return err
		}
		var cbs [3]int64
		for i, cb := range []*backend.JobInsertParams{p.Callbacks.OnSuccess, p.Callbacks.OnFailure, p.Callbacks.OnComplete} {
			if cb == nil {
				continue
			}
			ids, _, _, err := addMembers(ctx, tx, res.ID, []*backend.JobInsertParams{cb}, true, map[string]struct{}{})
			if err != nil {
				return err
			}
			cbs[i] = ids[0]
		}
		if _, err := tx.ExecContext(ctx, wfStmt.batchCallbacks, res.ID, cbs[0], cbs[1], cbs[2]); err != nil {
			return err
		}
		var err error
		if res.IDs, res.Duplicates, _, err = addMembers(ctx, tx, res.ID, p.Jobs, false, wake); err != nil {
			return err
		}
		return finishBatch(ctx, tx, res.ID, time.Now(), wake)
	})
	if err != nil {
		if missingObject(err) {
			return nil, backend.ExplainMissingObject(ctx, b, fmt.Errorf("insert batch: %w", err))
		}
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	b.st.hub.PublishQueues(wake)
	return res, nil
}

// BatchAdd implements backend.WorkflowStore.
func (b *Backend) BatchAdd(ctx context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	res := &backend.JobInsertManyResult{}
	wake := map[string]struct{}{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		clear(wake)
		var sealed bool
		switch err := tx.QueryRowContext(ctx, wfStmt.batchLock, p.ID).Scan(&sealed); {
		case errors.Is(err, sql.ErrNoRows):
			return backend.ErrBatchNotFound
		case err != nil:
			return err
		case sealed:
			return backend.ErrBatchSealed
		}
		var err error
		res.IDs, res.Duplicates, res.Count, err = addMembers(ctx, tx, p.ID, p.Jobs, false, wake)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	b.st.hub.PublishQueues(wake)
	return res, nil
}

// BatchSeal implements backend.WorkflowStore.
func (b *Backend) BatchSeal(ctx context.Context, id int64) (*backend.Batch, error) {
	wake := map[string]struct{}{}
	var bt *backend.Batch
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		clear(wake)
		var one int64
		if err := tx.QueryRowContext(ctx, wfStmt.batchSeal, id).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return backend.ErrBatchNotFound
			}
			return err
		}
		if err := finishBatch(ctx, tx, id, time.Now(), wake); err != nil {
			return err
		}
		var err error
		bt, err = scanBatch(tx.QueryRowContext(ctx, wfStmt.batchGet, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seal batch %d: %w", id, err)
	}
	b.st.hub.PublishQueues(wake)
	return bt, nil
}

func scanBatch(row rowScanner) (*backend.Batch, error) {
	var (
		bt       backend.Batch
		created  int64
		finished sql.NullInt64
	)
	if err := row.Scan(&bt.ID, &bt.Name, &created, &bt.Sealed, &bt.Total, &bt.Completed, &bt.Discarded, &bt.Cancelled,
		&finished, &bt.OnSuccess, &bt.OnFailure, &bt.OnComplete); err != nil {
		return nil, err
	}
	bt.CreatedAt = fromMicros(created)
	bt.FinishedAt = fromNullMicros(finished)
	return &bt, nil
}

// BatchGet implements backend.WorkflowStore.
func (b *Backend) BatchGet(ctx context.Context, id int64) (*backend.Batch, error) {
	bt, err := scanBatch(b.st.readers.QueryRowContext(ctx, wfStmt.batchGet, id))
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
	rows, err := b.st.readers.QueryContext(ctx, wfStmt.batchList, p.BeforeID, limit)
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
	rows, err := b.st.readers.QueryContext(ctx, wfStmt.batchMemberList, p.ID, p.AfterID, limit)
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
