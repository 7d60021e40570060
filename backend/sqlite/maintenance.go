package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

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
		rows, err := tx.QueryContext(ctx, stmt.rescue, now.UnixMicro(), now.UTC().Format(time.RFC3339Nano), max)
		if err != nil {
			return err
		}
		var settles []int64
		for rows.Next() {
			var (
				s, queue string
				id       int64
				deps     bool
			)
			if err := rows.Scan(&s, &queue, &id, &deps); err != nil {
				rows.Close()
				return err
			}
			if backend.State(s) == backend.StateDiscarded {
				res.Discarded++
				if deps {
					settles = append(settles, id)
				}
			} else {
				res.Retried++
				wake[queue] = struct{}{}
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return settle(ctx, tx, settles, wake)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	b.st.hub.PublishQueues(wake)
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt.cleanup, nowMicros(), p.CompletedAge.Microseconds(), p.DiscardedAge.Microseconds(), p.CancelledAge.Microseconds(), max)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || int(n) >= max {
			return err
		}
		if _, err := tx.ExecContext(ctx, stmt.flowPruneRates, nowMicros()-time.Hour.Microseconds()); err != nil {
			return fmt.Errorf("clean up rate states: %w", err)
		}
		if _, err := tx.ExecContext(ctx, wfStmt.prune); err != nil {
			return fmt.Errorf("clean up workflows and batches: %w", err)
		}
		return cleanupDebounce(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	return int(n), nil
}

// LeaderElect implements backend.Backend.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var leader string
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, stmt.leaderElect, p.Name, p.ClientID, nowMicros(), p.TTL.Microseconds()).Scan(&leader)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("elect leader %q: %w", p.Name, err)
	}
	return leader == p.ClientID, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, stmt.leaderResign, p.Name, p.ClientID)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign leader %q: %w", p.Name, err)
	}
	return nil
}
