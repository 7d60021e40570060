package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// claimSQL claims due pending rows of one queue in claim order. The write
// lock makes it exclusive, so it needs no row locks; INDEXED BY keeps it on
// the ordered partial index whatever the statistics say.
const claimSQL = `UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_pending
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?4 AND run_at <= ?1
  ORDER BY priority, run_at, id
  LIMIT ?5
)
RETURNING ` + jobColumns

// claimProbeSQL tells from a read connection whether a claim would find
// anything, so an idle poll never takes the write lock.
const claimProbeSQL = `SELECT 1 FROM spool_jobs INDEXED BY spool_jobs_pending
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?1 AND run_at <= ?2
LIMIT 1`

// JobClaim implements backend.Backend. Rows come back in claim order.
//
// A read first checks that the queue has a due job: idle polls (from every
// process sharing the file) then cost a read, not a turn at the write lock,
// and a claim never waits behind a writer's open transaction for nothing.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	var one int
	err := b.st.readers.QueryRowContext(ctx, claimProbeSQL, p.Queue, nowMicros()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	b.st.noteLease(p.Lease)
	var raws []*rawJob
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, claimSQL, nowMicros(), p.Lease.Microseconds(), p.ClaimID, p.Queue, p.Max)
		if err != nil {
			return err
		}
		raws, err = collectRawJobs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	// Decoded once the write lock is released.
	jobs, err := decodeJobs(raws)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *backend.JobRow) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return jobs, nil
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE spool_jobs
SET state = 'available', attempt = attempt - 1, leased_until = NULL, leased_by = NULL
WHERE id IN (SELECT id FROM spool_jobs INDEXED BY spool_jobs_leased WHERE state = 'running' AND leased_by = ?1)`, p.ClaimID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release claim %q: %w", p.ClaimID, err)
	}
	return int(n), nil
}
