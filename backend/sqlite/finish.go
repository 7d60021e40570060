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

// finishInput is the JSON array of [id, fence, outcome, delay_us, error]
// rows that the finish statements read with json_each.
const finishInput = `(SELECT e.value->>0 AS fid, e.value->>1 AS ffence, e.value->>2 AS outcome,
  e.value->>3 AS delay, e.value->>4 AS err FROM json_each(?2) AS e)`

// finishDeleteSQL deletes completed jobs whose lease holds (DeleteCompleted).
const finishDeleteSQL = `DELETE FROM spool_jobs WHERE id IN (
  SELECT j.id FROM ` + finishInput + ` AS i JOIN spool_jobs AS j ON j.id = i.fid
  WHERE i.outcome = 1 AND j.fence = i.ffence AND j.state = 'running'
)
RETURNING id, fence`

// finishUpdateSQL writes every outcome of a batch, each row guarded by (id,
// fence, running). Outcome codes match backend.Outcome: 1 complete, 2 retry,
// 3 snooze, 4 cancel, 5 discard, 6 release. ?3 skips completions (deleted
// instead). SET expressions read the row as it was before the update.
const finishUpdateSQL = `UPDATE spool_jobs AS j SET
  state = CASE
    WHEN i.outcome = 1 THEN 'completed'
    WHEN i.outcome = 2 AND j.attempt >= j.max_attempts THEN 'discarded'
    WHEN i.outcome = 2 THEN 'retryable'
    WHEN i.outcome = 3 AND i.delay > 0 THEN 'scheduled'
    WHEN i.outcome = 4 THEN 'cancelled'
    WHEN i.outcome = 5 THEN 'discarded'
    ELSE 'available'
  END,
  run_at = CASE WHEN i.outcome IN (2, 3) THEN ?1 + i.delay ELSE j.run_at END,
  attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
  finalized_at = CASE
    WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN ?1
  END,
  leased_until = NULL,
  leased_by = NULL,
  errors = CASE WHEN i.err IS NULL THEN j.errors
    ELSE json_insert(coalesce(j.errors, '[]'), '$[#]', json(i.err)) END
FROM ` + finishInput + ` AS i
WHERE j.id = i.fid AND j.fence = i.ffence AND j.state = 'running' AND NOT (?3 AND i.outcome = 1)
RETURNING id, fence`

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
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		applied = applied[:0]
		if p.DeleteCompleted {
			rows, err := tx.QueryContext(ctx, finishDeleteSQL, nil, input)
			if err != nil {
				return err
			}
			if applied, err = appendLeases(applied, rows); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, finishUpdateSQL, now.UnixMicro(), input, p.DeleteCompleted)
		if err != nil {
			return err
		}
		applied, err = appendLeases(applied, rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
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
