package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// JobClaim implements backend.Backend. Rows come back in claim order.
//
// A read first checks that the queue has a due job: idle polls (from every
// process sharing the file) then cost a read, not a turn at the write lock,
// and a claim never waits behind a writer's open transaction for nothing.
func (b *Backend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	var one int
	err := b.st.readers.QueryRowContext(ctx, stmt.claimProbe, p.Queue, nowMicros()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	b.st.noteLease(p.Lease)
	claim, err := b.st.prepared(ctx, stmt.claim)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	var raws []*rawJob
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		c := claimed{queue: p.Queue, claimID: p.ClaimID, now: nowMicros(), leaseUS: p.Lease.Microseconds()}
		rows, err := tx.StmtContext(ctx, claim).QueryContext(ctx, c.now, c.leaseUS, c.claimID, c.queue, p.Max)
		if err != nil {
			return err
		}
		raws, err = collectClaimed(rows, c)
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
	slices.SortFunc(jobs, backend.ClaimOrder)
	return jobs, nil
}

// JobReleaseClaim implements backend.Backend.
func (b *Backend) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt.releaseClaim, p.ClaimID)
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
