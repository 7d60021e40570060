package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// claimColumns is what a claim reads (claim.sql), in collectClaimed's
// order: the columns the claim does not know. The queue, the state
// (running), the lease and the attempt time are the claim's own
// parameters, so they are not copied out of SQLite for every row; a
// running job waits for nothing, so neither are wait_kind and deps_left.
// attempt and fence are read before the claim increments them. A column at
// its default comes back as NULL (empty tags and metadata, no key, no
// workflow…), which the driver passes without a value to allocate.
const claimColumns = `id, kind, args, priority, run_at, attempt, max_attempts, fence, created_at,
  nullif(tags, '[]'), nullif(metadata, '{}'), finalized_at, errors, unique_key, unique_states, output, flow_key,
  has_dependents, workflow_id, workflow_task, batch_id`

// claimColumnCount is the number of claimColumns.
const claimColumnCount = 21

// claimed is what a claim knows of every row it takes.
type claimed struct {
	queue, claimID string
	now, leaseUS   int64
	// max is the most rows the claim reads (its LIMIT; 0: not known).
	max int
}

// collectClaimed reads the rows of claim.sql (claimColumns) and closes
// rows, as the claim leases them: attempt and fence one more than read.
// The JSON columns are decoded later, out of the write lock
// (rawJob.decode).
//
// Rows are allocated in blocks (claimBlock) that double with the rows
// read so far, up to 1,024, and never hold more than the rows the claim
// may still read (c.max): a block's unused rows would be allocated,
// cleared and kept alive with the rest, and a claim of 1,500 rows would
// allocate 2,048.
//
// Every column is scanned into an interface value and converted here:
// database/sql converts an integer column into an *int64 (or an
// sql.NullInt64) by reflection, which cost more than the rest of a row's
// scan. Kinds are interned (a batch usually holds few), and the args of a
// block of rows share one array.
func collectClaimed(rows *sql.Rows, c claimed) ([]*rawJob, error) {
	defer rows.Close()
	var (
		out         []*rawJob
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
			block = make([]rawJob, claimBlock(len(out), c.max))
		}
		r := &block[0]
		block = block[1:]
		j := &r.j
		if err := rows.Scan(dest[:]...); err != nil {
			return nil, err
		}
		j.ID, r.idArg = cv.int(vals[0]), vals[0]
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
		j.Priority, j.Attempt, j.MaxAttempts = int16(cv.int(vals[3])), int16(cv.int(vals[5])+1), int16(cv.int(vals[6]))
		j.RunAt, j.Fence, j.CreatedAt = fromMicros(cv.int(vals[4])), int32(cv.int(vals[7])+1), fromMicros(cv.int(vals[8]))
		r.tags, r.meta = cv.textOr(vals[9], "[]"), cv.textOr(vals[10], "{}")
		if vals[11] != nil {
			t := fromMicros(cv.int(vals[11]))
			j.FinalizedAt = &t
		}
		r.errs, r.out = cv.nullText(vals[12]), cv.nullText(vals[15])
		j.UniqueKey, j.UniqueStates = cv.textOr(vals[13], ""), backend.UniqueStates(cv.intOr(vals[14]))
		j.FlowKey, j.HasDependents = cv.textOr(vals[16], ""), cv.int(vals[17]) != 0
		j.WorkflowID, j.WorkflowTask, j.BatchID = cv.intOr(vals[18]), cv.textOr(vals[19], ""), cv.intOr(vals[20])
		if cv.err != nil {
			return nil, cv.err
		}
		j.Queue, j.State = c.queue, backend.StateRunning
		r.leasedUntil, r.attemptedAt = leasedUntil, attemptedAt
		j.LeasedUntil, j.AttemptedAt, j.LeasedBy = &r.leasedUntil, &r.attemptedAt, c.claimID
		out = append(out, r)
	}
	return out, rows.Err()
}

// claimBlock is the size of the block of rows allocated once read rows
// have been read of a claim of at most limit rows (0: not known): as many
// as were read (at least 16, at most 1,024), but no more than may still
// come.
func claimBlock(read, limit int) int {
	n := min(max(read, 16), 1024)
	if rest := limit - read; rest > 0 {
		n = min(n, rest)
	}
	return n
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

// intOr is int, or 0 for NULL.
func (c *columnValues) intOr(v any) int64 {
	if v == nil {
		return 0
	}
	return c.int(v)
}

// nullText is text, or invalid for NULL.
func (c *columnValues) nullText(v any) sql.NullString {
	if v == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: c.text(v), Valid: true}
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
