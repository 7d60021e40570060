package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/spoolq/spool/backend"
)

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
		err := db.QueryRowContext(ctx, b.sql.await.debounceLock, p.Key).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := db.ExecContext(ctx, b.sql.await.debounceMake, p.Key); err != nil {
				return fmt.Errorf("make key: %w", err)
			}
			err = db.QueryRowContext(ctx, b.sql.await.debounceLock, p.Key).Scan(&cur)
		}
		if err != nil {
			return fmt.Errorf("lock key: %w", err)
		}
		if cur.Valid {
			var id int64
			err := db.QueryRowContext(ctx, b.sql.await.debounceFind, cur.Int64).Scan(&id)
			switch {
			case err == nil:
				var args any
				if p.ReplaceArgs {
					args = string(p.Job.Args)
				}
				w, m := micros(p.Window), micros(p.MaxWait)
				if _, err := db.ExecContext(ctx, b.sql.await.debounceMove, w, m, m, args, id); err != nil {
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
		if _, err := db.ExecContext(ctx, b.sql.await.debounceSet, id, p.Key); err != nil {
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
	rows, err := b.db.QueryContext(ctx, b.sql.await.finishedSince, sqlTime(p.Since), sqlTime(p.Since), p.AfterID, limit)
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
		_, err := b.db.ExecContext(ctx, b.sql.await.debounceCleanup)
		return err
	})
	if err != nil {
		return fmt.Errorf("clean up debounced keys: %w", err)
	}
	return nil
}
