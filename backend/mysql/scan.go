package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads one row of jobColumns, plus extra trailing columns.
func scanJob(row scanner, extra ...any) (*backend.JobRow, error) {
	var (
		j                                   backend.JobRow
		state                               string
		args, errs, tags, meta, out         []byte
		leasedUntil, attemptedAt, finalized sql.NullTime
		leasedBy                            sql.NullString
	)
	dest := []any{&j.ID, &j.Queue, &j.Kind, &args, &state, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
		&j.Fence, &leasedUntil, &leasedBy, &j.CreatedAt, &attemptedAt, &finalized, &errs, &tags, &meta,
		&j.UniqueKey, &j.UniqueStates, &out, &j.FlowKey,
		&j.WaitKind, &j.DepsLeft, &j.HasDependents, &j.WorkflowID, &j.WorkflowTask, &j.BatchID}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	j.State = backend.State(state)
	j.Args = json.RawMessage(args)
	j.Metadata = json.RawMessage(meta)
	if out != nil {
		j.Output = json.RawMessage(out)
	}
	// A lease is left in place when its job stops running (schema 16): it
	// means something only while the job runs.
	if j.State == backend.StateRunning {
		j.LeasedUntil = storedTime(leasedUntil)
		j.LeasedBy = strings.TrimRight(leasedBy.String, " ") // stored padded: leaseHolder
	}
	j.AttemptedAt = storedTime(attemptedAt)
	j.FinalizedAt = storedTime(finalized)
	if err := json.Unmarshal(tags, &j.Tags); err != nil {
		return nil, fmt.Errorf("decode tags of job %d: %w", j.ID, err)
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if len(errs) > 0 {
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("decode error history of job %d: %w", j.ID, err)
		}
	}
	return &j, nil
}

// storedTime maps a stored time to a *time.Time: nil for NULL and for the
// sentinels noTime and neverTime, which mean "none" (no real time of the
// backend's is before year 1001 or in year 9999).
func storedTime(t sql.NullTime) *time.Time {
	if !t.Valid || t.Time.Year() <= 1000 || t.Time.Year() >= 9999 {
		return nil
	}
	v := t.Time
	return &v
}

// collectJobs reads every row of jobColumns.
func collectJobs(rows *sql.Rows) ([]*backend.JobRow, error) {
	defer rows.Close()
	var out []*backend.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// collectHeads reads rows of jobColumns followed by the database's now, as
// the claim queries return them.
func collectHeads(rows *sql.Rows) ([]*backend.JobRow, time.Time, error) {
	defer rows.Close()
	var (
		out []*backend.JobRow
		now time.Time
	)
	for rows.Next() {
		j, err := scanJob(rows, &now)
		if err != nil {
			return nil, now, err
		}
		out = append(out, j)
	}
	return out, now, rows.Err()
}
