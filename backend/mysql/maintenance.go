package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

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
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return b.settleStray(ctx, tx)
		}
		if err := execCount(ctx, tx, b.sql.rescueUpdate+inList(ids), len(ids)); err != nil {
			return err
		}
		// Discarded jobs with dependents (and any a cancel left) settle
		// them.
		return b.settleStray(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return &res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	n, err := b.cleanupJobs(ctx, p, max)
	if err != nil || n >= max {
		return n, err
	}
	err = b.retry(ctx, func() error {
		_, err := b.db.ExecContext(ctx, b.sql.flowPruneRates)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("clean up rate states: %w", err)
	}
	if err := b.cleanupDebounce(ctx); err != nil {
		return n, err
	}
	return n, b.pruneWorkflows(ctx)
}

// cleanupJobs deletes up to max finished jobs past their retention.
func (b *Backend) cleanupJobs(ctx context.Context, p *backend.JobCleanupParams, max int) (int, error) {
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
	due := []any{minAge, ages[0], ages[0], ages[1], ages[1], ages[2], ages[2]}
	var n int64
	err := b.retry(ctx, func() error {
		// Read, then delete by primary key: a locking scan of the
		// finalized index would lock entries before rows, the reverse
		// of a finish, and deadlock with one (cleanup_select.sql).
		ids, err := queryIDs(ctx, b.db, b.sql.cleanupSelect, append(due, max)...)
		if err != nil || len(ids) == 0 {
			n = 0
			return err
		}
		slices.Sort(ids) // rows locked in ascending order, as finishes lock theirs
		res, err := b.db.ExecContext(ctx, b.sql.cleanup+inList(ids), due...)
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
