package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
)

// JobRescue implements backend.Backend. In one transaction it locks running
// rows whose lease ended by the database clock (skipping rows others hold
// where the server has SKIP LOCKED), then returns them to the queue with the
// attempt counted, or discards them at max attempts.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	max := p.MaxOrDefault()
	lock := " FOR UPDATE"
	if b.server.skipLocked {
		lock += " SKIP LOCKED"
	}
	var res backend.JobRescueResult
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		res = backend.JobRescueResult{}
		rows, err := tx.QueryContext(ctx, b.sql.rescueSelect+"\nLIMIT "+strconv.Itoa(max)+lock)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var (
				id               int64
				attempt, maxAtts int
			)
			if err := rows.Scan(&id, &attempt, &maxAtts); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			if attempt >= maxAtts {
				res.Discarded++
			} else {
				res.Retried++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		return execCount(ctx, tx, b.sql.rescueUpdate+inList(ids), len(ids))
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return &res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	ages := []int64{micros(p.CompletedAge), micros(p.DiscardedAge), micros(p.CancelledAge)}
	var minAge int64
	for _, a := range ages {
		if a > 0 && (minAge == 0 || a < minAge) {
			minAge = a
		}
	}
	if minAge == 0 {
		return 0, nil // every state is kept
	}
	var n int64
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.cleanup, minAge, ages[0], ages[0], ages[1], ages[1], ages[2], ages[2], max)
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
	limit := p.LimitOrDefault()
	var q strings.Builder
	q.WriteString(b.sql.listHead)
	args := []any{p.AfterID}
	if p.Queue != "" {
		q.WriteString(" AND queue = ?")
		args = append(args, p.Queue)
	}
	if p.Kind != "" {
		q.WriteString(" AND kind = ?")
		args = append(args, p.Kind)
	}
	if len(p.States) > 0 {
		q.WriteString(" AND state IN (")
		for i, s := range p.States {
			if !s.Valid() {
				return nil, fmt.Errorf("list jobs: unknown state %q", s)
			}
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("?")
			args = append(args, string(s))
		}
		q.WriteString(")")
	}
	q.WriteString(" ORDER BY id LIMIT " + strconv.Itoa(limit))
	rows, err := b.db.QueryContext(ctx, q.String(), args...)
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

// JobCancel implements backend.Backend. A running job's lease holder learns
// of it at its next heartbeat (no push channel in MySQL).
func (b *Backend) JobCancel(ctx context.Context, p *backend.JobCancelParams) (*backend.JobRow, error) {
	return b.changeJob(ctx, "cancel", b.sql.cancel, p.ID)
}

// changeJob runs a single-job state change and reads the row back in the
// same transaction; when the update matched nothing it tells "no such job"
// from "not allowed in its state".
func (b *Backend) changeJob(ctx context.Context, op, query string, id int64) (*backend.JobRow, error) {
	var j *backend.JobRow
	err := b.inTx(ctx, func(tx *sql.Tx) error {
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
		return err
	})
	var se *stateError
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%s job %d: %w", op, id, backend.ErrNotFound)
	case errors.As(err, &se):
		return nil, fmt.Errorf("%s job %d (state %s): %w", op, id, se.state, backend.ErrInvalidState)
	case err != nil:
		return nil, fmt.Errorf("%s job %d: %w", op, id, err)
	}
	return j, nil
}

// stateError is a state change that does not apply to the job's state.
type stateError struct{ state backend.State }

func (e *stateError) Error() string { return "not allowed in state " + string(e.state) }

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

// LeaderElect implements backend.Backend: renew or take over an expired
// term with one UPDATE; when there is no row, INSERT it, and a duplicate key
// means another client took it first.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var elected bool
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.leaderUpdate, p.ClientID, p.ClientID, micros(p.TTL), p.Name, p.ClientID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			elected = n == 1
			return err
		}
		_, err = b.db.ExecContext(ctx, b.sql.leaderInsert, p.Name, p.ClientID, micros(p.TTL))
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 { // duplicate key: the term is held
			elected = false
			return nil
		}
		elected = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return elected, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	err := b.retry(ctx, func() error {
		_, err := b.db.ExecContext(ctx, b.sql.leaderResign, p.Name, p.ClientID)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign leader: %w", err)
	}
	return nil
}
