package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
)

// scanJob reads one row of jobColumns.
func scanJob(row pgx.Row) (*backend.JobRow, error) {
	var (
		j     backend.JobRow
		state string
		errs  []byte
		args  []byte
		meta  []byte
		ust   int16
		out   []byte
	)
	if err := row.Scan(&j.ID, &j.Queue, &j.Kind, &args, &state, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
		&j.Fence, &j.LeasedUntil, &j.LeasedBy, &j.CreatedAt, &j.AttemptedAt, &j.FinalizedAt, &errs, &j.Tags, &meta,
		&j.UniqueKey, &ust, &out, &j.FlowKey); err != nil {
		return nil, err
	}
	j.UniqueStates = backend.UniqueStates(ust)
	if out != nil {
		j.Output = json.RawMessage(out)
	}
	j.State = backend.State(state)
	j.Args = json.RawMessage(args)
	j.Metadata = json.RawMessage(meta)
	if len(errs) > 0 {
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("decode error history of job %d: %w", j.ID, err)
		}
	}
	return &j, nil
}

func collectJobs(rows pgx.Rows) ([]*backend.JobRow, error) {
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

func micros(d time.Duration) int64 { return d.Microseconds() }

// collectLeases reads (id, fence) rows.
func collectLeases(rows pgx.Rows) ([]backend.LeaseRef, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.LeaseRef, error) {
		var l backend.LeaseRef
		err := r.Scan(&l.ID, &l.Fence)
		return l, err
	})
}
