package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/spoolq/spool/backend"
)

// The statements of debounced inserts and of the finished-job feed, with
// {{db}} the quoted database. Times are UTC, by the server's clock.
const (
	debounceMake = `INSERT INTO {{db}}.spool_debounce (debounce_key, job_id, started_at) VALUES (?, NULL, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE debounce_key = debounce_key`
	debounceLock = `SELECT job_id FROM {{db}}.spool_debounce WHERE debounce_key = ? FOR UPDATE`
	// debounceFind locks job ? if it is still pending; a claim that took it
	// first leaves nothing to find.
	debounceFind = `SELECT id FROM {{db}}.spool_jobs WHERE id = ? AND state IN ('available', 'scheduled', 'retryable') FOR UPDATE`
	// debounceMove sets the run time (assignments run left to right, so
	// state sees the new run_at): now + window, never before the run time,
	// never after creation + max wait (0: no bound); args replaced when
	// not NULL.
	debounceMove = `UPDATE {{db}}.spool_jobs SET
  run_at = GREATEST(run_at, LEAST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    IF(? > 0, created_at + INTERVAL ? MICROSECOND, TIMESTAMP('9999-12-31 00:00:00')))),
  state = IF(state = 'available' AND run_at > UTC_TIMESTAMP(6), 'scheduled', state),
  args = COALESCE(?, args)
WHERE id = ?`
	debounceSet     = `UPDATE {{db}}.spool_debounce SET job_id = ?, started_at = UTC_TIMESTAMP(6) WHERE debounce_key = ?`
	debounceCleanup = `DELETE FROM {{db}}.spool_debounce
WHERE started_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_jobs j WHERE j.id = spool_debounce.job_id AND j.state IN ('available', 'scheduled', 'retryable'))`
	finishedSince = `SELECT id, queue, kind, state, finalized_at FROM {{db}}.spool_jobs
WHERE finalized_at >= ? AND (finalized_at > ? OR id > ?) AND state IN ('completed', 'discarded', 'cancelled')
ORDER BY finalized_at, id LIMIT ?`
)

func (b *Backend) awaitSQL(q string) string {
	return strings.ReplaceAll(q, "{{db}}", quoteIdent(b.database))
}

// JobInsertDebounced implements backend.Backend in one transaction (the
// caller's, or one of its own, run again on a deadlock): the key's row lock
// orders the inserts of one key, and the job's row lock orders a move
// against a claim.
func (b *Backend) JobInsertDebounced(ctx context.Context, p *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	callerTx, err := dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	job := *p.Job
	job.RunAt, job.Delay = nil, backend.DebounceFirstDelay(p.Window, p.MaxWait)
	job.UniqueKey, job.UniqueStates = "", 0
	row, err := b.encodeInsert(&job)
	if err != nil {
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	var res *backend.JobDebounceResult
	run := func(db DBTX) error {
		// A key's row is locked by a locking read when it exists (a record
		// lock); only a new key takes the upsert, whose locks on the index
		// deadlock against concurrent upserts of neighbouring keys.
		var cur sql.NullInt64
		err := db.QueryRowContext(ctx, b.awaitSQL(debounceLock), p.Key).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := db.ExecContext(ctx, b.awaitSQL(debounceMake), p.Key); err != nil {
				return fmt.Errorf("make key: %w", err)
			}
			err = db.QueryRowContext(ctx, b.awaitSQL(debounceLock), p.Key).Scan(&cur)
		}
		if err != nil {
			return fmt.Errorf("lock key: %w", err)
		}
		if cur.Valid {
			var id int64
			err := db.QueryRowContext(ctx, b.awaitSQL(debounceFind), cur.Int64).Scan(&id)
			switch {
			case err == nil:
				var args any
				if p.ReplaceArgs {
					args = string(p.Job.Args)
				}
				w, m := micros(p.Window), micros(p.MaxWait)
				if _, err := db.ExecContext(ctx, b.awaitSQL(debounceMove), w, m, m, args, id); err != nil {
					return fmt.Errorf("move job %d: %w", id, err)
				}
				res = &backend.JobDebounceResult{ID: id, Debounced: true}
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("find job %d: %w", cur.Int64, err)
			}
		}
		id, err := b.insertChunk(ctx, db, []insertRow{row})
		if err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if _, err := db.ExecContext(ctx, b.awaitSQL(debounceSet), id, p.Key); err != nil {
			return fmt.Errorf("point key at job %d: %w", id, err)
		}
		res = &backend.JobDebounceResult{ID: id}
		return nil
	}
	if callerTx != nil {
		err = run(callerTx)
	} else {
		committing := false
		err = b.inTx(ctx, func(tx *sql.Tx) error {
			committing = false
			if err := run(tx); err != nil {
				return err
			}
			committing = true
			return nil
		})
		if err != nil {
			err = connWriteError(err, committing)
		}
	}
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
	rows, err := b.db.QueryContext(ctx, b.awaitSQL(finishedSince), sqlTime(p.Since), sqlTime(p.Since), p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	defer rows.Close()
	var out []*backend.FinishedJob
	for rows.Next() {
		var j backend.FinishedJob
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.State, &j.FinalizedAt); err != nil {
			return nil, fmt.Errorf("list finished jobs: %w", err)
		}
		j.FinalizedAt = j.FinalizedAt.UTC()
		out = append(out, &j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	return out, nil
}

// cleanupDebounce deletes the rows of debounced keys whose cycle began over
// an hour ago and whose job is no longer pending; a row an insert moved
// meanwhile has a new started_at, which the locking delete reads.
func (b *Backend) cleanupDebounce(ctx context.Context) error {
	err := b.retry(ctx, func() error {
		_, err := b.db.ExecContext(ctx, b.awaitSQL(debounceCleanup))
		return err
	})
	if err != nil {
		return fmt.Errorf("clean up debounced keys: %w", err)
	}
	return nil
}
