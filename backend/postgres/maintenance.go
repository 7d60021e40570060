package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobRescue implements backend.Backend.
func (b *Backend) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	max := p.MaxOrDefault()
	// Expired lease rows go back into spool_jobs as running rows, which
	// the rescue statement then finds expired.
	if _, err := b.pool.Exec(ctx, b.sql.unleaseExpired, max); err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	rows, err := b.pool.Query(ctx, b.sql.rescue, max)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	res := &backend.JobRescueResult{}
	var (
		state, queue string
		key          claimKey
		lowest       queueKeys
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &queue, &key.priority, &key.runAt, &key.id}, func() error {
		if backend.State(state) == backend.StateDiscarded {
			res.Discarded++
		} else {
			res.Retried++
			b.floors.lower(queue, key)
			lowest.note(queue, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	// A rescued job keeps its run_at, below the claim floors of the other
	// processes, which no trigger tells (rescue updates rows in place):
	// they hear of it as of a new job, and their next claim reads from
	// below it, instead of finding it only at their next probe (1 to 10 s).
	b.announceDue(ctx, lowest)
	// Jobs with dependents that a rescue discarded (or a cancel left)
	// settle them now.
	if err := b.settleStray(ctx); err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return res, nil
}

// JobCleanup implements backend.Backend.
func (b *Backend) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	max := p.MaxOrDefault()
	tag, err := b.pool.Exec(ctx, b.sql.cleanup, micros(p.CompletedAge), micros(p.DiscardedAge), micros(p.CancelledAge), max)
	if err != nil {
		return 0, fmt.Errorf("clean up jobs: %w", err)
	}
	n := int(tag.RowsAffected())
	if n < max {
		if _, err := b.pool.Exec(ctx, b.sql.wf.prune); err != nil {
			return n, fmt.Errorf("clean up workflows and batches: %w", err)
		}
		if _, err := b.pool.Exec(ctx, b.sql.flow.pruneRates); err != nil {
			return n, fmt.Errorf("clean up rate states: %w", err)
		}
		if err := b.cleanupDebounce(ctx); err != nil {
			return n, err
		}
		if err := b.sweepOrphans(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// orphanBatch is how many jobs' records one cleanup looks at: a sweep
// reads each job by index, so a store with many parked jobs is gone
// through over several cleanups instead of in one long statement.
const orphanBatch = 1000

// sweepOrphans deletes the steps and signals of orphanBatch jobs that are
// gone, going on from where the last call stopped (from the start again
// once it read to the end).
func (b *Backend) sweepOrphans(ctx context.Context) error {
	b.orphansMu.Lock()
	defer b.orphansMu.Unlock()
	var last, looked int64
	if err := b.pool.QueryRow(ctx, b.sql.steps.orphans, b.orphansAfter, orphanBatch).Scan(&last, &looked); err != nil {
		if isUndefined(err) {
			return nil // a schema before step sets (25)
		}
		return fmt.Errorf("clean up orphaned steps and signals: %w", err)
	}
	if looked < orphanBatch {
		last = 0
	}
	b.orphansAfter = last
	return nil
}

// LeaderElect implements backend.Backend.
func (b *Backend) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	var leader string
	err := b.pool.QueryRow(ctx, b.sql.leaderElect, p.Name, p.ClientID, micros(p.TTL)).Scan(&leader)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leader == p.ClientID, nil
}

// LeaderResign implements backend.Backend.
func (b *Backend) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if _, err := b.pool.Exec(ctx, b.sql.leaderResign, p.Name, p.ClientID); err != nil {
		return fmt.Errorf("resign leader: %w", err)
	}
	return nil
}
