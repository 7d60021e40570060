package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.st.readers.QueryRowContext(ctx, stmt.get, id))
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
	tx, err := txOf(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	query := b.st.readers.QueryContext
	if tx != nil {
		query = tx.QueryContext
	}
	conds, tail, err := sqlfilter.List(p, func(t time.Time) any { return t.UnixMicro() })
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	rows, err := query(ctx, stmt.list+conds.SQL()+tail, append([]any{p.AfterID}, conds.Args...)...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobRetry implements backend.Backend: a finished or pending job becomes
// available now with a fresh set of attempts. The fence is kept, so old
// leases stay fenced out.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	var j *backend.JobRow
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = changeJob(ctx, tx, p.ID, stmt.retry)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry job %d: %w", p.ID, err)
	}
	b.st.hub.Publish(backend.Wake{Queue: j.Queue})
	return j, nil
}

// JobCancel implements backend.Backend. Cancelling a running job also wakes
// this process's listeners with its id, so a lease holder in this process
// stops it at once, and records an event that other processes' watchers
// read within watchInterval.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	var (
		j          *backend.JobRow
		wasRunning bool
		wake       = map[string]struct{}{}
	)
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		var state string
		err := tx.QueryRowContext(ctx, stmt.jobState, p.ID).Scan(&state)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		wasRunning = backend.State(state) == backend.StateRunning
		if j, err = changeJob(ctx, tx, p.ID, stmt.cancel); err != nil {
			return err
		}
		if j.HasDependents {
			clear(wake)
			if err := settle(ctx, tx, []int64{p.ID}, wake); err != nil {
				return err
			}
			j.HasDependents = false
		}
		if !wasRunning {
			return nil
		}
		return recordCancels(ctx, tx, []int64{p.ID})
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, err)
	}
	b.st.hub.PublishQueues(wake)
	if wasRunning {
		b.st.hub.Publish(backend.Wake{CancelledID: j.ID})
	}
	return j, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	var j *backend.JobRow
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = changeJob(ctx, tx, p.ID, stmt.deleteJob)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d: %w", p.ID, err)
	}
	return j, nil
}

// JobThroughput implements backend.Backend.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	out, err := sqlfilter.ReadThroughput(ctx, b.st.readers, fromMicros,
		stmt.throughput, time.Now().Add(-p.Window).UnixMicro(), p.Bucket.Microseconds(), p.Queue)
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	return out, nil
}

// changeJob runs a single-job state change (?1 now, ?2 id) and tells "no such
// job" from "not allowed in its state" when it matched nothing.
func changeJob(ctx context.Context, tx *sql.Tx, id int64, query string) (*backend.JobRow, error) {
	j, err := scanJob(tx.QueryRowContext(ctx, query, nowMicros(), id))
	if err == nil {
		return j, nil
	}
	if isUniqueViolation(err) {
		return nil, backend.ErrUniqueConflict
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	var one int
	switch err := tx.QueryRowContext(ctx, stmt.jobExists, id).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, backend.ErrNotFound
	case err != nil:
		return nil, err
	}
	return nil, backend.ErrInvalidState
}

// QueueStatsAll implements backend.Backend.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	rows, err := b.st.readers.QueryContext(ctx, stmt.stats)
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

// QueuePause implements backend.Backend. Resuming wakes this process's
// listeners of the queue at once; other processes see the commit through
// their watch of the file.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	var resumed int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		if p.Paused {
			_, err := tx.ExecContext(ctx, stmt.queuePause, p.Queue, nowMicros())
			return err
		}
		res, err := tx.ExecContext(ctx, stmt.queueResume, p.Queue)
		if err != nil {
			return err
		}
		resumed, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, err)
	}
	if resumed > 0 {
		b.st.hub.Publish(backend.Wake{Queue: p.Queue})
	}
	return nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	rows, err := b.st.readers.QueryContext(ctx, stmt.queuePausedAll)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	defer rows.Close()
	var out []backend.PausedQueue
	for rows.Next() {
		var (
			q  backend.PausedQueue
			us int64
		)
		if err := rows.Scan(&q.Queue, &us); err != nil {
			return nil, fmt.Errorf("list paused queues: %w", err)
		}
		q.Since = time.UnixMicro(us).UTC()
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}

// isUniqueViolation reports whether err is a write refused by
// spool_jobs_unique. Both drivers report SQLite's own message.
func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: spool_jobs.unique_key")
}

// cancelEventAge is how long cancellation events are kept: far longer than
// a watcher takes to read them, and longer than any heartbeat interval, so
// that a holder that missed one has found the cancellation by heartbeat.
const cancelEventAge = time.Minute

// recordCancels records the cancellation of running jobs for other
// processes (migrations/005_cancels.sql) and drops old events, in the
// cancelling transaction.
func recordCancels(ctx context.Context, tx *sql.Tx, ids []int64) error {
	now := nowMicros()
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, stmt.cancelEvent, now, id); err != nil {
			return fmt.Errorf("record cancellation: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, stmt.cancelEventsPrune, now-cancelEventAge.Microseconds()); err != nil {
		return fmt.Errorf("drop old cancellation events: %w", err)
	}
	return nil
}
