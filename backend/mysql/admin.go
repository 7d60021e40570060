package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.db.QueryRowContext(ctx, b.sql.get, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// JobList implements backend.Backend.
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	conds, tail, err := sqlfilter.List(p, func(t time.Time) any { return sqlTime(t) })
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	query := b.sql.listHead + conds.SQL()
	if len(p.States) == 1 && p.States[0] == backend.StateRunning {
		// Running rows are the phase 2 range of the claim index (few, at
		// most the workers' claims): saying so lets MariaDB read that range
		// instead of the primary key across every job.
		query += " AND phase = 2"
	}
	query += tail
	args := append([]any{p.AfterID}, conds.Args...)
	var db DBTX = b.db
	if p.Tx != nil {
		tx, err := dbtx(p.Tx)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		db = tx
	}
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobRetry implements backend.Backend.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	return b.changeJob(ctx, "retry", b.sql.retry, p.ID)
}

// JobCancel implements backend.Backend. Cancelling a running job records an
// event that every process's WatchCancels reads within watchCancelsInterval.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	return b.changeJobAfter(ctx, "cancel", b.sql.cancel, p.ID, func(tx *sql.Tx) error {
		return b.recordCancel(ctx, tx, p.ID)
	})
}

// recordCancel records the cancellation of job id, if it is running, for
// other processes, and drops old events; in the cancelling transaction,
// before the cancel itself.
func (b *Backend) recordCancel(ctx context.Context, tx *sql.Tx, id int64) error {
	res, err := tx.ExecContext(ctx, b.sql.cancelEvent, id)
	if err != nil {
		return fmt.Errorf("record cancellation: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, b.sql.cancelEventsPrune); err != nil {
		return fmt.Errorf("drop old cancellation events: %w", err)
	}
	return nil
}

// changeJob runs a single-job state change and reads the row back in the
// same transaction; when the update matched nothing it tells "no such job"
// from "not allowed in its state". A connection fault matches
// backend.ErrNotWritten or backend.ErrOutcomeUnknown (writeTx).
func (b *Backend) changeJob(ctx context.Context, op, query string, id int64) (*backend.JobRow, error) {
	return b.changeJobAfter(ctx, op, query, id, nil)
}

// changeJobAfter is changeJob with before run first in the transaction.
func (b *Backend) changeJobAfter(ctx context.Context, op, query string, id int64, before func(*sql.Tx) error) (*backend.JobRow, error) {
	var j *backend.JobRow
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, query, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		j, err = scanJob(tx.QueryRowContext(ctx, b.sql.get, id))
		if err == nil && n == 0 {
			return &stateError{state: j.State}
		}
		if err == nil && j.HasDependents && j.State.IsFinal() {
			// A cancelled job with dependents settles them in its
			// transaction.
			if err = b.settle(ctx, tx, []int64{id}); err == nil {
				j.HasDependents = false
			}
		}
		return err
	})
	var se *stateError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrNotFound)
	case errors.As(err, &se):
		return nil, fmt.Errorf("%s job %d (state %s): %w", op, id, se.state, backend.ErrInvalidState)
	case isUniqueViolation(err):
		return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrUniqueConflict)
	case err != nil:
		return nil, fmt.Errorf("%s job %d: %w", op, id, err)
	}
	return j, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	var j *backend.JobRow
	err := b.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if j, err = scanJob(tx.QueryRowContext(ctx, b.sql.getForUpdate, p.ID)); err != nil {
			return err
		}
		if j.State == backend.StateRunning || j.State == backend.StateWaiting || j.HasDependents {
			// A job others wait for stays: they would wait forever.
			return &stateError{state: j.State}
		}
		_, err = tx.ExecContext(ctx, b.sql.deleteJob, p.ID)
		return err
	})
	var se *stateError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("delete job %d: %w", p.ID, backend.ErrNotFound)
	case errors.As(err, &se):
		return nil, fmt.Errorf("delete job %d (state %s): %w", p.ID, se.state, backend.ErrInvalidState)
	case err != nil:
		return nil, fmt.Errorf("delete job %d: %w", p.ID, err)
	}
	return j, nil
}

// JobThroughput implements backend.Backend.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	bucket := p.BucketSeconds()
	out, err := sqlfilter.ReadThroughput(ctx, b.db, func(s int64) time.Time { return time.Unix(s, 0).UTC() },
		b.sql.throughput, bucket, bucket, int64(p.Window/time.Second), p.Queue, p.Queue)
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	return out, nil
}

// QueueStatsAll implements backend.Backend.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	rows, err := b.db.QueryContext(ctx, b.sql.stats)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rows.Close()
	out, err := backend.CollectQueueStats(rows)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// stateError is a state change that does not apply to the job's state.
type stateError struct{ state backend.State }

func (e *stateError) Error() string { return "not allowed in state " + string(e.state) }

// QueuePause implements backend.Backend. A resume of a paused queue also
// appends a wake-up note in its transaction, which every Listen reads and
// turns into a wake-up of the queue (readNotes): the heads' figure of the
// paused queues alone cannot tell a pause and a resume that both came
// between two of a Listen's looks from no change, and the jobs inserted
// meanwhile, whose wake-ups found the queue paused, then waited for the
// poll.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	var err error
	if p.Paused {
		_, err = b.db.ExecContext(ctx, b.sql.queuePause, p.Queue)
	} else {
		err = b.resume(ctx, p.Queue)
	}
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, connWriteError(err, true))
	}
	return nil
}

// resume resumes queue and, when it was paused, appends its resume note in
// the same transaction.
func (b *Backend) resume(ctx context.Context, queue string) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, b.sql.queueResume, queue)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return tx.Commit() // not paused: nothing to tell
	}
	note, err := tx.ExecContext(ctx, b.sql.wakeNote, resumePrefix+queue)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if err := b.noteWritten(ctx, note); err != nil {
		return fmt.Errorf("resumed; %w", err)
	}
	return nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	rows, err := b.db.QueryContext(ctx, b.sql.queuePausedAll)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	defer rows.Close()
	var out []backend.PausedQueue
	for rows.Next() {
		var q backend.PausedQueue
		if err := rows.Scan(&q.Queue, &q.Since); err != nil {
			return nil, fmt.Errorf("list paused queues: %w", err)
		}
		q.Since = q.Since.UTC()
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}
