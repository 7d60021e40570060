package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	stmts, err := b.st.claimStmts(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	var raws []*rawJob
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		c := claimed{queue: p.Queue, claimID: p.ClaimID, now: nowMicros(), leaseUS: p.Lease.Microseconds()}
		raws, err = claimRows(ctx, tx, stmts, c, p.Max)
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
	return jobs, nil // in claim order, as claim.sql reads them
}

// claimStatements are a claim's two statements (claim.sql, claim_lease.sql).
type claimStatements struct{ read, lease *sql.Stmt }

// claimStmts returns the claim's statements, prepared on the writer pool.
func (st *store) claimStmts(ctx context.Context) (claimStatements, error) {
	read, err := st.prepared(ctx, stmt.claim)
	if err != nil {
		return claimStatements{}, err
	}
	lease, err := st.prepared(ctx, stmt.claimLease)
	if err != nil {
		return claimStatements{}, err
	}
	return claimStatements{read: read, lease: lease}, nil
}

// claimRows claims up to max jobs of c's queue in tx, a write transaction
// of the store: claim.sql reads the rows, then claim_lease.sql leases the
// same rows, which the write lock keeps as they were read. It returns them
// in claim order, as leased.
func claimRows(ctx context.Context, tx *sql.Tx, s claimStatements, c claimed, max int) ([]*rawJob, error) {
	c.max = max
	rows, err := tx.StmtContext(ctx, s.read).QueryContext(ctx, c.now, c.queue, max)
	if err != nil {
		return nil, err
	}
	raws, err := collectClaimed(rows, c)
	if err != nil || len(raws) == 0 {
		return nil, err
	}
	res, err := tx.StmtContext(ctx, s.lease).ExecContext(ctx, c.now, c.queue, max, c.leaseUS, c.claimID)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	if n != int64(len(raws)) {
		// The transaction is rolled back: nothing is leased.
		return nil, fmt.Errorf("leased %d rows of the %d read", n, len(raws))
	}
	return raws, nil
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
