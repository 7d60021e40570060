package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
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

// collectClaimed reads the rows of claimColumns followed by the database's
// now, as the claim queries of queue return them, and the now. The rows
// still need markClaimed: their state, lease and attempt time are the
// claim's.
//
// A claim reads up to thousands of rows, so the decoding is the client's
// largest cost per job after the runtime's: integers and byte columns are
// read as the driver's raw bytes, without database/sql's conversions
// (each of which allocated a string), a row's byte columns share one
// allocation, and the kind, the same for most rows, is one string.
func collectClaimed(rows *sql.Rows, queue string) ([]*backend.JobRow, time.Time, error) {
	defer rows.Close()
	var (
		out                                                 []*backend.JobRow
		now, runAt, createdAt                               time.Time
		id, priority, attempt, maxAttempts, fence, uStates  sql.RawBytes
		depsLeft, hasDeps, workflowID, batchID              sql.RawBytes
		kind, args, errs, tags, meta, uKey, output, flowKey sql.RawBytes
		waitKind, workflowTask                              sql.RawBytes
		lastKind                                            string
	)
	dest := []any{&id, &kind, &args, &priority, &runAt, &attempt, &maxAttempts, &fence, &createdAt, &errs, &tags, &meta,
		&uKey, &uStates, &output, &flowKey, &waitKind, &depsLeft, &hasDeps, &workflowID, &workflowTask, &batchID, &now}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, now, err
		}
		j := &backend.JobRow{Queue: queue, RunAt: runAt, CreatedAt: createdAt}
		var d decimals
		j.ID = d.parse(id, 64)
		j.Priority = int16(d.parse(priority, 16))
		j.Attempt = int16(d.parse(attempt, 16))
		j.MaxAttempts = int16(d.parse(maxAttempts, 16))
		j.Fence = int32(d.parse(fence, 32))
		j.UniqueStates = backend.UniqueStates(d.parse(uStates, 16))
		j.DepsLeft = int(d.parse(depsLeft, 64))
		j.HasDependents = d.parse(hasDeps, 8) != 0
		j.WorkflowID = d.parse(workflowID, 64)
		j.BatchID = d.parse(batchID, 64)
		if d.err != nil {
			return nil, now, fmt.Errorf("decode claimed job: %w", d.err)
		}
		if string(kind) != lastKind {
			lastKind = string(kind)
		}
		j.Kind = lastKind
		// One allocation for the row's JSON columns, each a slice of it
		// with its own capacity, so that appending to one cannot reach
		// the next.
		buf := make([]byte, 0, len(args)+len(meta)+len(output))
		buf = append(buf, args...)
		j.Args = json.RawMessage(buf[0:len(buf):len(buf)])
		buf = append(buf, meta...)
		j.Metadata = json.RawMessage(buf[len(args):len(buf):len(buf)])
		if output != nil {
			buf = append(buf, output...)
			j.Output = json.RawMessage(buf[len(args)+len(meta) : len(buf) : len(buf)])
		}
		if len(uKey) > 0 {
			j.UniqueKey = string(uKey)
		}
		if len(flowKey) > 0 {
			j.FlowKey = string(flowKey)
		}
		if len(waitKind) > 0 {
			j.WaitKind = string(waitKind)
		}
		if len(workflowTask) > 0 {
			j.WorkflowTask = string(workflowTask)
		}
		if string(tags) == "[]" {
			j.Tags = []string{}
		} else if err := json.Unmarshal(tags, &j.Tags); err != nil {
			return nil, now, fmt.Errorf("decode tags of job %d: %w", j.ID, err)
		} else if j.Tags == nil {
			j.Tags = []string{}
		}
		if len(errs) > 0 {
			if err := json.Unmarshal(errs, &j.Errors); err != nil {
				return nil, now, fmt.Errorf("decode error history of job %d: %w", j.ID, err)
			}
		}
		out = append(out, j)
	}
	return out, now, rows.Err()
}

// decimals parses integer columns, keeping the first error.
type decimals struct{ err error }

// parse is parseDecimal, 0 after an error.
func (d *decimals) parse(b []byte, bits int) int64 {
	if d.err != nil {
		return 0
	}
	v, err := parseDecimal(b, bits)
	d.err = err
	return v
}

// parseDecimal parses a signed decimal integer of the given bit size from
// a column's text, without the string strconv would need.
func parseDecimal(b []byte, bits int) (int64, error) {
	s := b
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 19 {
		return strconv.ParseInt(string(b), 10, bits)
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return strconv.ParseInt(string(b), 10, bits)
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 1<<(bits-1)-1 && !(neg && v == 1<<(bits-1)) {
		return strconv.ParseInt(string(b), 10, bits)
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}
