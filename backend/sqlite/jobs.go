package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
)

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state, priority, run_at, attempt, max_attempts, fence,
  leased_until, coalesce(leased_by, ''), created_at, attempted_at, finalized_at, errors, tags, metadata`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// rawJob is a row of jobColumns as read, its JSON columns not decoded yet:
// a write transaction reads rows raw and decodes them after it has ended.
type rawJob struct {
	j          backend.JobRow
	tags, meta string
	errs       sql.NullString
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
		&j.Fence, &leasedUntil, &j.LeasedBy, &createdAt, &attemptedAt, &finalized, &r.errs, &r.tags, &r.meta); err != nil {
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
	if err := json.Unmarshal([]byte(r.tags), &j.Tags); err != nil {
		return nil, fmt.Errorf("decode tags of job %d: %w", j.ID, err)
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

// insertColumns are bound per row by insertSQL, in this order.
const insertColumns = 10

// maxInsertRows keeps one INSERT's bound variables under SQLite's limit of
// 32766.
const maxInsertRows = 1000

// insertSQL returns a multi-row INSERT of n rows.
func insertSQL(n int) string {
	var b strings.Builder
	b.Grow(160 + n*24)
	b.WriteString(`INSERT INTO spool_jobs (queue, kind, args, priority, run_at, created_at, state, max_attempts, tags, metadata) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?)")
	}
	b.WriteString(" RETURNING id")
	return b.String()
}

// fullInsertSQL is the statement for a full chunk, built once.
var fullInsertSQL = insertSQL(maxInsertRows)

// preparedChunksMax is how many chunks of an insert are built before the
// write lock is taken.
const preparedChunksMax = 10

// insertChunk is one multi-row INSERT, ready to run.
type insertChunk struct {
	query string
	n     int
	args  []any
}

// prepareInsert builds the INSERT of jobs (at most maxInsertRows), appending
// its arguments to args, and records in wake the queues of jobs due now.
func prepareInsert(jobs []*backend.JobInsertParams, now int64, wake map[string]struct{}, args []any) (insertChunk, error) {
	for _, j := range jobs {
		at := now + j.Delay.Microseconds()
		if j.RunAt != nil {
			at = j.RunAt.UnixMicro()
		}
		state := backend.StateAvailable
		if at > now {
			state = backend.StateScheduled
		} else {
			wake[j.Queue] = struct{}{}
		}
		tags := "[]"
		if len(j.Tags) > 0 {
			t, err := json.Marshal(j.Tags)
			if err != nil {
				return insertChunk{}, fmt.Errorf("encode tags: %w", err)
			}
			tags = string(t)
		}
		meta := "{}"
		if len(j.Metadata) > 0 {
			meta = string(j.Metadata)
		}
		args = append(args, j.Queue, j.Kind, string(j.Args), int64(j.Priority), at, now, string(state),
			int64(j.MaxAttempts), tags, meta)
	}
	query := fullInsertSQL
	if len(jobs) != maxInsertRows {
		query = insertSQL(len(jobs))
	}
	return insertChunk{query: query, n: len(jobs), args: args}, nil
}

// JobInsertMany implements backend.Backend: multi-row INSERTs of up to 1,000
// rows, in one write transaction (the caller's, or one of the backend's own).
// NoIDs changes nothing: reading the ids back costs little here.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Jobs) == 0 {
		return &backend.JobInsertManyResult{}, nil
	}
	// Everything but the statements is done before the write lock is taken
	// (encoding, conversions, the statements' text), for the first
	// preparedChunksMax chunks: a larger insert builds the rest under the
	// lock, where its statements take far longer anyway, so that its memory
	// stays bounded by a chunk.
	now := nowMicros()
	wake := map[string]struct{}{}
	prepared := make([]insertChunk, 0, min((len(p.Jobs)+maxInsertRows-1)/maxInsertRows, preparedChunksMax))
	for start := 0; start < len(p.Jobs) && len(prepared) < preparedChunksMax; start += maxInsertRows {
		c, err := prepareInsert(p.Jobs[start:min(start+maxInsertRows, len(p.Jobs))], now, wake, nil)
		if err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		prepared = append(prepared, c)
	}
	ids := make([]int64, 0, len(p.Jobs))
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		ids = ids[:0]
		var buf []any
		for i, start := 0, 0; start < len(p.Jobs); i, start = i+1, start+maxInsertRows {
			var c insertChunk
			if i < len(prepared) {
				c = prepared[i]
			} else {
				var err error
				if c, err = prepareInsert(p.Jobs[start:min(start+maxInsertRows, len(p.Jobs))], now, wake, buf[:0]); err != nil {
					return err
				}
				buf = c.args
			}
			rows, err := tx.QueryContext(ctx, c.query, c.args...)
			if err != nil {
				return err
			}
			first := len(ids)
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(ids)-first != c.n {
				return fmt.Errorf("inserted %d of %d rows", len(ids)-first, c.n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	// Rows are inserted in VALUES order with increasing ids; RETURNING's
	// order is not promised, so sort each chunk's (each above the last's).
	for start := 0; start < len(ids); start += maxInsertRows {
		slices.Sort(ids[start:min(start+maxInsertRows, len(ids))])
	}
	// A hint: with a caller's transaction the wake may come before its
	// commit; the claim it causes then waits for the write lock, which the
	// transaction holds until it ends.
	b.st.hub.publishQueues(wake)
	res := &backend.JobInsertManyResult{Count: len(ids)}
	if !p.NoIDs {
		res.IDs = ids
	}
	return res, nil
}

// claimSQL claims due pending rows of one queue in claim order. The write
// lock makes it exclusive, so it needs no row locks; INDEXED BY keeps it on
// the ordered partial index whatever the statistics say.
const claimSQL = `UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_pending
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?4 AND run_at <= ?1
  ORDER BY priority, run_at, id
  LIMIT ?5
)
RETURNING ` + jobColumns

// claimProbeSQL tells from a read connection whether a claim would find
// anything, so an idle poll never takes the write lock.
const claimProbeSQL = `SELECT 1 FROM spool_jobs INDEXED BY spool_jobs_pending
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?1 AND run_at <= ?2
LIMIT 1`

// JobClaim implements backend.Backend. Rows come back in claim order.
//
// A read first checks that the queue has a due job: idle polls (from every
// process sharing the file) then cost a read, not a turn at the write lock,
// and a claim never waits behind a writer's open transaction for nothing.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	var one int
	err := b.st.readers.QueryRowContext(ctx, claimProbeSQL, p.Queue, nowMicros()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	b.st.noteLease(p.Lease)
	var raws []*rawJob
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, claimSQL, nowMicros(), p.Lease.Microseconds(), p.ClaimID, p.Queue, p.Max)
		if err != nil {
			return err
		}
		raws, err = collectRawJobs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	// Decoded once the write lock is released.
	jobs, err := decodeJobs(raws)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *backend.JobRow) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return jobs, nil
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE spool_jobs
SET state = 'available', attempt = attempt - 1, leased_until = NULL, leased_by = NULL
WHERE id IN (SELECT id FROM spool_jobs INDEXED BY spool_jobs_leased WHERE state = 'running' AND leased_by = ?1)`, p.ClaimID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	return int(n), nil
}

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

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	b.st.noteLease(p.Lease)
	input := encodeLeases(p.Leases)
	var alive []backend.LeaseRef
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE spool_jobs AS j SET leased_until = ?1 + ?2
FROM (SELECT e.value->>0 AS fid, e.value->>1 AS ffence FROM json_each(?3) AS e) AS i
WHERE j.id = i.fid AND j.fence = i.ffence AND j.state = 'running'
RETURNING id, fence`, nowMicros(), p.Lease.Microseconds(), input)
		if err != nil {
			return err
		}
		alive, err = appendLeases(alive[:0], rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(p.Leases, alive, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRescue implements backend.Backend.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	max := p.MaxOrDefault()
	now := time.Now()
	res := &backend.JobRescueResult{}
	// A rescued job keeps its run_at, and so its place in the queue.
	wake := map[string]struct{}{} // queues of the rescued jobs, runnable now
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		*res = backend.JobRescueResult{}
		clear(wake)
		rows, err := tx.QueryContext(ctx, `UPDATE spool_jobs SET
  state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'retryable' END,
  finalized_at = CASE WHEN attempt >= max_attempts THEN ?1 END,
  leased_until = NULL,
  leased_by = NULL,
  errors = json_insert(coalesce(errors, '[]'), '$[#]', json_object(
    'attempt', attempt, 'at', ?2,
    'error', 'lease expired: the worker ' || coalesce(leased_by, '') || ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_leased
  WHERE state = 'running' AND leased_until < ?1
  ORDER BY leased_until
  LIMIT ?3
)
RETURNING state, queue`, now.UnixMicro(), now.UTC().Format(time.RFC3339Nano), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s, queue string
			if err := rows.Scan(&s, &queue); err != nil {
				return err
			}
			if backend.State(s) == backend.StateDiscarded {
				res.Discarded++
			} else {
				res.Retried++
				wake[queue] = struct{}{}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	b.st.hub.publishQueues(wake)
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM spool_jobs WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_finished
  WHERE state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND ?2 > 0 AND finalized_at < ?1 - ?2)
      OR (state = 'discarded' AND ?3 > 0 AND finalized_at < ?1 - ?3)
      OR (state = 'cancelled' AND ?4 > 0 AND finalized_at < ?1 - ?4))
  LIMIT ?5
)`, nowMicros(), p.CompletedAge.Microseconds(), p.DiscardedAge.Microseconds(), p.CancelledAge.Microseconds(), max)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	return int(n), nil
}
