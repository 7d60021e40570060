package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spoolq/spool/backend"
)

// claimColumns is what a claim returns for every row, in scanClaimed's
// order: the columns the claim does not know and a handler reads. The
// queue, the state (running), the lease and the attempt time are the
// claim's own parameters, so they are not copied out of SQLite for every
// row; a running job waits for nothing, so neither are wait_kind and
// deps_left. The columns that hold their defaults for nearly every job
// claimed (a finished time, an error history, unique and flow keys, an
// output, a workflow or batch, dependents) are not returned either: the
// last column says whether the row holds anything else in them, and those
// rows' columns are read by claim_extras.sql in the claim's transaction.
// A row returned costs SQLite and the driver per column, and a plain job
// has none of them; an empty tags array or metadata object comes back as
// NULL, which the driver passes without a string to allocate.
const claimColumns = `id, kind, args, priority, run_at, attempt, max_attempts, fence, created_at,
  nullif(tags, '[]'), nullif(metadata, '{}'),
  finalized_at IS NOT NULL OR errors IS NOT NULL OR unique_key IS NOT NULL OR unique_states IS NOT NULL
    OR output IS NOT NULL OR flow_key IS NOT NULL OR has_dependents <> 0 OR workflow_id IS NOT NULL
    OR workflow_task IS NOT NULL OR batch_id IS NOT NULL`

// claimColumnCount is the number of claimColumns.
const claimColumnCount = 12

// claimed is what a claim knows of every row it takes.
type claimed struct {
	queue, claimID string
	now, leaseUS   int64
}

// collectClaimed reads the rows of a claim statement (claimColumns) and
// closes rows, then reads the other columns of the rows that need them
// (claim_extras.sql) in tx, the claim's transaction. The JSON columns are
// decoded later, out of the write lock (rawJob.decode).
func collectClaimed(ctx context.Context, tx *sql.Tx, rows *sql.Rows, c claimed) ([]*rawJob, error) {
	out, extras, err := scanClaimed(rows, c)
	if err != nil || len(extras) == 0 {
		return out, err
	}
	if err := readExtras(ctx, tx, extras); err != nil {
		return nil, fmt.Errorf("read claimed jobs' columns: %w", err)
	}
	return out, nil
}

// scanClaimed reads the rows of a claim statement and closes rows; extras
// are the rows whose other columns are still to read, by id.
//
// Every column is scanned into an interface value and converted here:
// database/sql converts an integer column into an *int64 by reflection,
// which cost more than the rest of a row's scan. Kinds are interned (a
// batch usually holds few), and the args of a block of rows share one
// array.
func scanClaimed(rows *sql.Rows, c claimed) (out []*rawJob, extras map[int64]*rawJob, err error) {
	defer rows.Close()
	var (
		vals        [claimColumnCount]any
		dest        [claimColumnCount]any
		block       []rawJob
		arena       []byte
		kinds       = map[string]string{}
		leasedUntil = fromMicros(c.now + c.leaseUS)
		attemptedAt = fromMicros(c.now)
		cv          columnValues
	)
	for i := range dest {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if len(block) == 0 {
			// Rows are allocated in blocks, not one by one.
			block = make([]rawJob, min(max(len(out), 16), 1024))
		}
		r := &block[0]
		block = block[1:]
		j := &r.j
		if err := rows.Scan(dest[:]...); err != nil {
			return nil, nil, err
		}
		j.ID = cv.int(vals[0])
		kind := cv.text(vals[1])
		k, ok := kinds[kind]
		if !ok {
			k = kind
			kinds[k] = k
		}
		j.Kind = k
		switch a := vals[2].(type) {
		case string:
			if cap(arena)-len(arena) < len(a) {
				arena = make([]byte, 0, max(16<<10, len(a)))
			}
			at := len(arena)
			arena = append(arena, a...)
			j.Args = json.RawMessage(arena[at:len(arena):len(arena)])
		case []byte: // a copy of the driver's (database/sql's scan into an any)
			j.Args = json.RawMessage(a)
		default:
			cv.fail(a)
		}
		j.Priority, j.Attempt, j.MaxAttempts = int16(cv.int(vals[3])), int16(cv.int(vals[5])), int16(cv.int(vals[6]))
		j.RunAt, j.Fence, j.CreatedAt = fromMicros(cv.int(vals[4])), int32(cv.int(vals[7])), fromMicros(cv.int(vals[8]))
		r.tags, r.meta = cv.textOr(vals[9], "[]"), cv.textOr(vals[10], "{}")
		if cv.int(vals[11]) != 0 {
			if extras == nil {
				extras = map[int64]*rawJob{}
			}
			extras[j.ID] = r
		}
		if cv.err != nil {
			return nil, nil, cv.err
		}
		j.Queue, j.State = c.queue, backend.StateRunning
		r.leasedUntil, r.attemptedAt = leasedUntil, attemptedAt
		j.LeasedUntil, j.AttemptedAt, j.LeasedBy = &r.leasedUntil, &r.attemptedAt, c.claimID
		out = append(out, r)
	}
	return out, extras, rows.Err()
}

// readExtras reads the columns claimColumns leaves out for the rows of
// extras (claim_extras.sql).
func readExtras(ctx context.Context, tx *sql.Tx, extras map[int64]*rawJob) error {
	ids := make([]byte, 0, len(extras)*12)
	ids = append(ids, '[')
	for id := range extras {
		if len(ids) > 1 {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, id, 10)
	}
	ids = append(ids, ']')
	rows, err := tx.QueryContext(ctx, stmt.claimExtras, string(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			id, uniqueStates int64
			finalized        sql.NullInt64
			e                rawJob
		)
		j := &e.j
		if err := rows.Scan(&id, &finalized, &e.errs, &j.UniqueKey, &uniqueStates, &e.out, &j.FlowKey,
			&j.HasDependents, &j.WorkflowID, &j.WorkflowTask, &j.BatchID); err != nil {
			return err
		}
		r, ok := extras[id]
		if !ok {
			return fmt.Errorf("job %d was not claimed", id)
		}
		n++
		r.errs, r.out = e.errs, e.out
		r.j.FinalizedAt = fromNullMicros(finalized)
		r.j.UniqueKey, r.j.UniqueStates, r.j.FlowKey = j.UniqueKey, backend.UniqueStates(uniqueStates), j.FlowKey
		r.j.HasDependents, r.j.WorkflowID, r.j.WorkflowTask, r.j.BatchID = j.HasDependents, j.WorkflowID, j.WorkflowTask, j.BatchID
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(extras) {
		return fmt.Errorf("read %d of %d jobs", n, len(extras))
	}
	return nil
}

// columnValues converts the values of a scan into interface values,
// keeping the first unexpected one as its error.
type columnValues struct{ err error }

func (c *columnValues) int(v any) int64 {
	if i, ok := v.(int64); ok {
		return i
	}
	c.fail(v)
	return 0
}

func (c *columnValues) text(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []byte:
		return string(s)
	}
	c.fail(v)
	return ""
}

// textOr is text, or def for NULL.
func (c *columnValues) textOr(v any, def string) string {
	if v == nil {
		return def
	}
	return c.text(v)
}

func (c *columnValues) fail(v any) {
	if c.err == nil {
		c.err = fmt.Errorf("claimed row: unexpected column value of type %T", v)
	}
}
