package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobFinishMany implements backend.Backend.
func (b *Backend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(p.Finishes) == 0 {
		return &backend.JobFinishManyResult{}, nil
	}
	now := time.Now()
	input, err := encodeFinishes(p.Finishes, now)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	applied := make([]backend.LeaseRef, 0, len(p.Finishes))
	var wake map[string]struct{}
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		applied = applied[:0]
		if p.DeleteCompleted {
			rows, err := tx.QueryContext(ctx, stmt.finishDelete, nil, input)
			if err != nil {
				return err
			}
			if applied, err = appendLeases(applied, rows); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, stmt.finishUpdate, now.UnixMicro(), input, p.DeleteCompleted, false)
		if err != nil {
			return err
		}
		if applied, err = appendLeases(applied, rows); err != nil || len(applied) >= len(p.Finishes) {
			return err
		}
		// Jobs with dependents (which the statements above leave alone)
		// are finished, never deleted (their dependents read them), and
		// settled in the same transaction.
		first := len(applied)
		rows, err = tx.QueryContext(ctx, stmt.finishUpdate, now.UnixMicro(), input, false, true)
		if err != nil {
			return err
		}
		if applied, err = appendLeases(applied, rows); err != nil || len(applied) == first {
			return err
		}
		ids := make([]int64, 0, len(applied)-first)
		for _, l := range applied[first:] {
			ids = append(ids, l.ID)
		}
		if wake == nil {
			wake = map[string]struct{}{}
		}
		clear(wake)
		return settle(ctx, tx, ids, wake)
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if len(wake) > 0 {
		b.st.hub.PublishQueues(wake)
	}
	return &backend.JobFinishManyResult{Rejected: backend.Unapplied(p.Finishes, applied, func(f backend.JobFinish) backend.LeaseRef { return f.Lease })}, nil
}

// encodeFinishes renders finishes as finishInput's JSON array. Error entries
// carry the attempt, the message, the trace and the time of the write.
func encodeFinishes(fs []backend.JobFinish, now time.Time) (string, error) {
	buf := make([]byte, 0, len(fs)*32)
	buf = append(buf, '[')
	for i, f := range fs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, f.Lease.ID, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(f.Lease.Fence), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(f.Outcome), 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, f.Delay.Microseconds(), 10)
		buf = append(buf, ',')
		if f.Error == nil {
			buf = append(buf, "null"...)
		} else {
			e := *f.Error
			e.At = now.UTC()
			enc, err := json.Marshal(e)
			if err != nil {
				return "", fmt.Errorf("encode error: %w", err)
			}
			buf = append(buf, enc...)
		}
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	return string(buf), nil
}

// appendLeases reads (id, fence) rows onto out and closes rows.
func appendLeases(out []backend.LeaseRef, rows *sql.Rows) ([]backend.LeaseRef, error) {
	defer rows.Close()
	for rows.Next() {
		var l backend.LeaseRef
		if err := rows.Scan(&l.ID, &l.Fence); err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// encodeLeases renders leases as a JSON array of [id, fence].
func encodeLeases(ls []backend.LeaseRef) string {
	buf := make([]byte, 0, len(ls)*20)
	buf = append(buf, '[')
	for i, l := range ls {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, l.ID, 10)
		buf = append(buf, ',')
		buf = strconv.AppendInt(buf, int64(l.Fence), 10)
		buf = append(buf, ']')
	}
	buf = append(buf, ']')
	return string(buf)
}
