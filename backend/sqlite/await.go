package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// The statements of debounced inserts and of the finished-job feed. Times
// are microseconds since the epoch.
const (
	// debounceLock makes or touches the key's row and returns its job.
	debounceLock = `INSERT INTO spool_debounce (key, job_id, started_at) VALUES (?1, NULL, ?2)
ON CONFLICT (key) DO UPDATE SET key = excluded.key RETURNING job_id`
	// debounceMove moves the run time of job ?1 if it is still pending: now
	// ?2 + window ?3, never before its run time, never after its creation +
	// max wait ?4 (0: no bound); args ?5 replace its args when not NULL.
	debounceMove = `UPDATE spool_jobs SET
  run_at = max(run_at, min(?2 + ?3, CASE WHEN ?4 > 0 THEN created_at + ?4 ELSE 9223372036854775807 END)),
  state = CASE WHEN state = 'available' AND max(run_at, min(?2 + ?3, CASE WHEN ?4 > 0 THEN created_at + ?4 ELSE 9223372036854775807 END)) > ?2
    THEN 'scheduled' ELSE state END,
  args = coalesce(?5, args)
WHERE id = ?1 AND state IN ('available', 'scheduled', 'retryable')
RETURNING id`
	debounceSet     = `UPDATE spool_debounce SET job_id = ?2, started_at = ?3 WHERE key = ?1`
	debounceCleanup = `DELETE FROM spool_debounce WHERE started_at < ?1
  AND NOT EXISTS (SELECT 1 FROM spool_jobs j WHERE j.id = spool_debounce.job_id AND j.state IN ('available', 'scheduled', 'retryable'))`
	finishedSince = `SELECT id, queue, kind, state, finalized_at FROM spool_jobs
WHERE finalized_at >= ?1 AND (finalized_at > ?1 OR id > ?2) AND state IN ('completed', 'discarded', 'cancelled')
ORDER BY finalized_at, id LIMIT ?3`
)

// JobInsertDebounced implements backend.Backend in one write transaction
// (the caller's, or one of the backend's own): the file's one writer orders
// the inserts of a key and every claim.
func (b *Backend) JobInsertDebounced(ctx context.Context, p *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	var res *backend.JobDebounceResult
	err = b.st.write(ctx, tx, func(tx *sql.Tx) error {
		now := nowMicros()
		var cur sql.NullInt64
		if err := tx.QueryRowContext(ctx, debounceLock, p.Key, now).Scan(&cur); err != nil {
			return fmt.Errorf("lock key: %w", err)
		}
		if cur.Valid {
			var args any
			if p.ReplaceArgs {
				args = string(p.Job.Args)
			}
			var id int64
			err := tx.QueryRowContext(ctx, debounceMove, cur.Int64, now, p.Window.Microseconds(), p.MaxWait.Microseconds(), args).Scan(&id)
			if err == nil {
				res = &backend.JobDebounceResult{ID: id, Debounced: true}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("move job %d: %w", cur.Int64, err)
			}
		}
		job := *p.Job
		job.RunAt, job.Delay = nil, backend.DebounceFirstDelay(p.Window, p.MaxWait)
		job.UniqueKey, job.UniqueStates = "", 0
		c, err := prepareInsert([]*backend.JobInsertParams{&job}, now, map[string]struct{}{}, nil)
		if err != nil {
			return err
		}
		r := &backend.JobDebounceResult{}
		if err := tx.QueryRowContext(ctx, c.query, c.args...).Scan(&r.ID); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if _, err := tx.ExecContext(ctx, debounceSet, p.Key, r.ID, now); err != nil {
			return fmt.Errorf("point key at job %d: %w", r.ID, err)
		}
		res = r
		return nil
	})
	if err != nil {
		if missingObject(err) {
			err = backend.ExplainMissingObject(ctx, b, err)
		}
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	return res, nil
}

// JobFinishedSince implements backend.Backend: a range scan of the index of
// finished jobs by finish time.
func (b *Backend) JobFinishedSince(ctx context.Context, p *backend.JobFinishedSinceParams) ([]*backend.FinishedJob, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.st.readers.QueryContext(ctx, finishedSince, p.Since.UnixMicro(), p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	defer rows.Close()
	var out []*backend.FinishedJob
	for rows.Next() {
		var j backend.FinishedJob
		var at int64
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.State, &at); err != nil {
			return nil, fmt.Errorf("list finished jobs: %w", err)
		}
		j.FinalizedAt = fromMicros(at)
		out = append(out, &j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	return out, nil
}

// cleanupDebounce deletes the rows of debounced keys whose cycle began over
// an hour ago and whose job is no longer pending; in the caller's write
// transaction, which orders it with the inserts.
func cleanupDebounce(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, debounceCleanup, nowMicros()-3600_000_000); err != nil {
		return fmt.Errorf("clean up debounced keys: %w", err)
	}
	return nil
}

// ListenFinished implements backend.FinishNotifier with the store's hub and
// its watcher of the file's data version: every commit by another
// connection (any process's finish among them) is reported, as a change to
// read, within about 20 ms.
func (b *Backend) ListenFinished(ctx context.Context, ready func(), onFinish func(ids []int64)) error {
	return b.st.hub.Listen(ctx, func() {
		b.st.startWatcher()
		ready()
	}, func(w backend.Wake) {
		if w.CancelledID == 0 {
			onFinish(nil)
		}
	})
}
