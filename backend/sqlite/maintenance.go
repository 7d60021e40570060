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

// LeaderElect implements backend.Backend.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var leader string
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `INSERT INTO spool_leader AS l (name, leader_id, elected_at, expires_at)
VALUES (?1, ?2, ?3, ?3 + ?4)
ON CONFLICT (name) DO UPDATE SET
  leader_id = excluded.leader_id,
  expires_at = excluded.expires_at,
  elected_at = CASE WHEN l.leader_id = excluded.leader_id THEN l.elected_at ELSE excluded.elected_at END
WHERE l.leader_id = excluded.leader_id OR l.expires_at < ?3
RETURNING leader_id`, p.Name, p.ClientID, nowMicros(), p.TTL.Microseconds()).Scan(&leader)
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
		_, err := tx.ExecContext(ctx, `DELETE FROM spool_leader WHERE name = ?1 AND leader_id = ?2`, p.Name, p.ClientID)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign leader %q: %w", p.Name, err)
	}
	return nil
}
