package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state, priority, run_at, attempt, max_attempts, fence,
  leased_until, coalesce(leased_by, ''), created_at, attempted_at, finalized_at, errors, tags, metadata,
  coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, ''),
  coalesce(wait_kind, ''), deps_left, has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// rawJob is a row of jobColumns as read, its JSON columns not decoded yet:
// a write transaction reads rows raw and decodes them after it has ended.
type rawJob struct {
	j          backend.JobRow
	tags, meta string
	errs, out  sql.NullString
	// leasedUntil and attemptedAt back a claimed row's pointers, so that
	// they are allocated with the row (claims allocate rows in blocks).
	leasedUntil, attemptedAt time.Time
	// idArg is a claimed row's id as the driver read it: an int64 in an
	// interface, which claim_lease.sql binds again (boxing the id anew
	// would cost an allocation per job).
	idArg any
}

// scanRawJob reads one row of jobColumns without decoding JSON.
func scanRawJob(row rowScanner) (*rawJob, error) {
	var (
		r                                   rawJob
		state, args                         string
		runAt, createdAt                    int64
		leasedUntil, attemptedAt, finalized sql.NullInt64
	)
	j := &r.j
	if err := row.Scan(&j.ID, &j.Queue, &j.Kind, &args, &state, &j.Priority, &runAt, &j.Attempt, &j.MaxAttempts,
		&j.Fence, &leasedUntil, &j.LeasedBy, &createdAt, &attemptedAt, &finalized, &r.errs, &r.tags, &r.meta,
		&j.UniqueKey, &j.UniqueStates, &r.out, &j.FlowKey,
		&j.WaitKind, &j.DepsLeft, &j.HasDependents, &j.WorkflowID, &j.WorkflowTask, &j.BatchID); err != nil {
		return nil, err
	}
	j.State = backend.State(state)
	j.Args = json.RawMessage(args)
	j.RunAt = fromMicros(runAt)
	j.CreatedAt = fromMicros(createdAt)
	j.LeasedUntil = fromNullMicros(leasedUntil)
	j.AttemptedAt = fromNullMicros(attemptedAt)
	j.FinalizedAt = fromNullMicros(finalized)
	return &r, nil
}

// decode finishes the row: tags, metadata and the error history.
func (r *rawJob) decode() (*backend.JobRow, error) {
	j := &r.j
	j.Metadata = json.RawMessage(r.meta)
	if r.out.Valid {
		j.Output = json.RawMessage(r.out.String)
	}
	if r.tags != "[]" { // most jobs have no tags: no decoder needed
		if err := json.Unmarshal([]byte(r.tags), &j.Tags); err != nil {
			return nil, fmt.Errorf("decode tags of job %d: %w", j.ID, err)
		}
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if r.errs.Valid && r.errs.String != "" {
		if err := json.Unmarshal([]byte(r.errs.String), &j.Errors); err != nil {
			return nil, fmt.Errorf("decode error history of job %d: %w", j.ID, err)
		}
	}
	return j, nil
}

// scanJob reads one row of jobColumns.
func scanJob(row rowScanner) (*backend.JobRow, error) {
	r, err := scanRawJob(row)
	if err != nil {
		return nil, err
	}
	return r.decode()
}

// collectRawJobs reads every row and closes rows.
func collectRawJobs(rows *sql.Rows) ([]*rawJob, error) {
	defer rows.Close()
	var out []*rawJob
	for rows.Next() {
		r, err := scanRawJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// decodeJobs decodes raw rows.
func decodeJobs(raws []*rawJob) ([]*backend.JobRow, error) {
	out := make([]*backend.JobRow, len(raws))
	for i, r := range raws {
		j, err := r.decode()
		if err != nil {
			return nil, err
		}
		out[i] = j
	}
	return out, nil
}

// collectJobs reads every row, closes rows and decodes them.
func collectJobs(rows *sql.Rows) ([]*backend.JobRow, error) {
	raws, err := collectRawJobs(rows)
	if err != nil {
		return nil, err
	}
	return decodeJobs(raws)
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nowMicros is the store's clock: the host's, in microseconds.
func nowMicros() int64 { return time.Now().UnixMicro() }
