package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlfilter"
)

// JobGet implements backend.Backend.
func (b *Backend) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.pool.QueryRow(ctx, b.sql.get, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, backend.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// JobList implements backend.Backend. The statement is list.sql's head
// and the filters given, so that each list is planned for its own filters
// (a generic statement with "($1 = ” OR queue = $1)" could use no index
// but the primary key).
func (b *Backend) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	db, err := b.dbtx(p.Tx)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	conds, tail, err := sqlfilter.List(p, func(t time.Time) any { return t })
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	rows, err := db.Query(ctx, b.sql.list+conds.Numbered(2)+tail, append([]any{p.AfterID}, conds.Args...)...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobDelete implements backend.Backend.
func (b *Backend) JobDelete(ctx context.Context, p *backend.JobDeleteParams) (*backend.JobRow, error) {
	return b.changeJob(ctx, "delete", b.sql.deleteJob, p.ID)
}

// JobThroughput implements backend.Backend.
func (b *Backend) JobThroughput(ctx context.Context, p *backend.JobThroughputParams) ([]backend.ThroughputBucket, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	// A read-only transaction without JIT: the statement's estimate (a
	// range scan per bucket) crosses jit_above_cost, and compiling it took
	// longer than running it.
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	rows, err := tx.Query(ctx, b.sql.throughput, p.Window.Seconds(), p.BucketSeconds(), p.Queue)
	if err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	var out []backend.ThroughputBucket
	for rows.Next() {
		var bk backend.ThroughputBucket
		if err := rows.Scan(&bk.Start, &bk.Completed, &bk.Discarded, &bk.Cancelled); err != nil {
			rows.Close()
			return nil, fmt.Errorf("job throughput: %w", err)
		}
		bk.Start = bk.Start.UTC()
		out = append(out, bk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("job throughput: %w", err)
	}
	return out, nil
}

// JobRetry implements backend.Backend.
func (b *Backend) JobRetry(ctx context.Context, p *backend.JobRetryParams) (*backend.JobRow, error) {
	j, err := b.changeJob(ctx, "retry", b.sql.retry, p.ID)
	if err == nil {
		b.floors.lower(j.Queue, claimKey{priority: j.Priority, runAt: j.RunAt, id: j.ID})
	}
	return j, err
}

// JobCancel implements backend.Backend. Cancelling a running job also sends
// a notification, so its lease holder can stop it without waiting for its
// next heartbeat.
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	// A running job held in a lease row is cancelled in place.
	// Moving the job out of its lease row does not cancel it: a failure
	// here leaves the cancel not written, whatever became of the move.
	if _, err := b.pool.Exec(ctx, b.sql.unleaseJobs, []int64{p.ID}); err != nil {
		return nil, fmt.Errorf("cancel job %d: %w", p.ID, notWritten(err))
	}
	j, err := b.changeJob(ctx, "cancel", b.sql.cancel, p.ID)
	if err != nil {
		return nil, err
	}
	if j.HasDependents {
		// Settled at once; should this fail, the leader's sweep
		// (settleStray) settles them at its next rescue.
		var wake queueKeys
		if err := b.inTx(ctx, b.pool, func(tx DBTX) error { wake = nil; return b.settle(ctx, tx, []int64{j.ID}, &wake, nil) }); err == nil {
			_ = b.announce(ctx, b.pool, wake)
			j.HasDependents = false
		}
	}
	if j.AttemptedAt != nil && j.Attempt > 0 {
		// A hint only: the cancellation is committed whether or not it is sent.
		if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, b.channel, cancelPrefix+strconv.FormatInt(j.ID, 10)); err != nil {
			return j, nil
		}
	}
	return j, nil
}

// changeJob runs a single-job state change and tells "no such job" from "not
// allowed in its state" when the update matched nothing. A connection fault
// matches backend.ErrNotWritten or backend.ErrOutcomeUnknown.
func (b *Backend) changeJob(ctx context.Context, op, query string, id int64) (*backend.JobRow, error) {
	j, err := scanJob(b.pool.QueryRow(ctx, query, id))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := b.JobGet(ctx, id)
		if errors.Is(gerr, backend.ErrNotFound) {
			return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrNotFound)
		}
		if gerr != nil {
			// The change matched no row: it wrote nothing.
			return nil, fmt.Errorf("%s job %d: %w", op, id, notWritten(gerr))
		}
		return nil, fmt.Errorf("%s job %d (state %s): %w", op, id, cur.State, backend.ErrInvalidState)
	}
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "spool_jobs_unique" {
		return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrUniqueConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("%s job %d: %w", op, id, autocommitWriteError(err))
	}
	return j, nil
}

// JobBulk implements backend.Backend: one statement per batch (see
// sql/bulk_*.sql). Retried jobs lower this process's claim floors; the
// holders of cancelled running jobs are notified.
func (b *Backend) JobBulk(ctx context.Context, p *backend.JobBulkParams) (*backend.JobBulkResult, error) {
	var query string
	switch p.Action {
	case backend.BulkRetry:
		query = b.sql.bulkRetry
	case backend.BulkCancel:
		query = b.sql.bulkCancel
	case backend.BulkDelete:
		query = b.sql.bulkDelete
	default:
		return nil, fmt.Errorf("bulk jobs: unknown action %d", p.Action)
	}
	states := make([]string, len(p.States))
	for i, s := range p.States {
		states[i] = string(s)
	}
	var after, before *time.Time
	if !p.CreatedAfter.IsZero() {
		after = &p.CreatedAfter
	}
	if !p.CreatedBefore.IsZero() {
		before = &p.CreatedBefore
	}
	var (
		res           *backend.JobBulkResult
		id            int64
		flag, changed bool
		queue         string
		priority      int16
		runAt         *time.Time
		notify        []string
		lower         []queueKey // the retried jobs' claim keys, for this process's floors
		cancelled     []int64
		wake          queueKeys
	)
	// The claim's plan settings: without them the planner, misled by the
	// filters' estimates, read every row above AfterID and sorted them for
	// each batch (a bitmap scan, then a sort), and joined the batch to the
	// table by a scan of the whole table: cancelling 1,000,000 jobs in
	// batches of 10,000 took 490 s. With them a batch reads the primary key
	// in order from AfterID, stops at its LIMIT, and updates by primary-key
	// lookups: 120 ms per batch of 10,000.
	err := b.ownTx(ctx, func(tx pgx.Tx) error {
		res, notify, lower, cancelled = &backend.JobBulkResult{}, nil, nil, nil
		if _, err := tx.Exec(ctx, claimSettings); err != nil {
			return err
		}
		if p.Action == backend.BulkCancel && (len(states) == 0 || slices.Contains(states, string(backend.StateRunning))) {
			// Running jobs held in lease rows are cancelled in place.
			if _, err := tx.Exec(ctx, b.sql.unleaseQueue, p.Queue); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, query, p.AfterID, p.Queue, p.Kind, states, after, before, p.MaxOrDefault())
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&id, &flag, &changed, &queue, &priority, &runAt}, func() error {
			res.Taken++
			res.LastID = max(res.LastID, id)
			if changed {
				res.Changed++
			}
			switch {
			case p.Action == backend.BulkRetry && flag:
				res.UniqueRetries = append(res.UniqueRetries, id)
			case p.Action == backend.BulkRetry && changed && runAt != nil:
				lower = append(lower, queueKey{queue, claimKey{priority: priority, runAt: *runAt, id: id}})
			case p.Action == backend.BulkCancel && flag && changed:
				notify = append(notify, cancelPrefix+strconv.FormatInt(id, 10))
			}
			if p.Action == backend.BulkCancel && changed {
				cancelled = append(cancelled, id)
			}
			return nil
		})
		if err != nil || len(cancelled) == 0 {
			return err
		}
		// Cancelled jobs with dependents settle them (settle skips the
		// others).
		wake = nil
		return b.settle(ctx, tx, cancelled, &wake, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("%s jobs: %w", p.Action, err)
	}
	for _, k := range lower {
		b.floors.lower(k.queue, k.key)
	}
	_ = b.announce(ctx, b.pool, wake)
	if len(notify) > 0 {
		// A hint only: the cancellations are committed whether or not it is sent.
		_, _ = b.pool.Exec(ctx, `SELECT pg_notify($1, x) FROM unnest($2::text[]) x`, b.channel, notify)
	}
	return res, nil
}

// QueueStatsAll implements backend.Backend.
func (b *Backend) QueueStatsAll(ctx context.Context) ([]backend.QueueStats, error) {
	rows, err := b.pool.Query(ctx, b.sql.stats)
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

// QueuePause implements backend.Backend. Resuming a paused queue notifies
// its listeners, in the same statement.
func (b *Backend) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	var err error
	if p.Paused {
		_, err = b.pool.Exec(ctx, b.sql.queuePause, p.Queue)
	} else {
		_, err = b.pool.Exec(ctx, b.sql.queueResume, p.Queue, b.channel)
	}
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", p.Op(), p.Queue, autocommitWriteError(err))
	}
	return nil
}

// QueuePausedAll implements backend.Backend.
func (b *Backend) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	rows, err := b.pool.Query(ctx, b.sql.queuePausedAll)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.PausedQueue, error) {
		var q backend.PausedQueue
		err := r.Scan(&q.Queue, &q.Since)
		q.Since = q.Since.UTC()
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}

// queueKey is a claim key of a queue.
type queueKey struct {
	queue string
	key   claimKey
}
