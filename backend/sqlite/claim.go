package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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

// claimStatements are a claim's statements: claim.sql, which reads the
// rows, and claim_lease.sql, which leases them by id, one per size bucket
// (leaseBuckets).
type claimStatements struct {
	read  *sql.Stmt
	lease []*sql.Stmt
}

// leaseBuckets are the sizes, in ids, of the lease statements: a claim's
// rows are cut into chunks of the largest and the last is padded up to
// the smallest bucket that holds it, as the plain completions' are, but
// in steps of two: a claim's last chunk is of any size, and each padded
// id costs a bind and a lookup.
var leaseBuckets = []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// claimLeaseSQLs holds claim_lease.sql for each size bucket, built once: the
// text is also the key of the writer's prepared statement.
var claimLeaseSQLs = sync.OnceValue(func() []string {
	out := make([]string, len(leaseBuckets))
	for b, n := range leaseBuckets {
		out[b] = strings.Replace(stmt.claimLease, "{{ids}}", idParams("?4", n), 1)
	}
	return out
})

// claimStmts returns the claim's statements, prepared on the writer pool.
func (st *store) claimStmts(ctx context.Context) (claimStatements, error) {
	read, err := st.prepared(ctx, stmt.claim)
	if err != nil {
		return claimStatements{}, err
	}
	s := claimStatements{read: read, lease: make([]*sql.Stmt, len(leaseBuckets))}
	for b, q := range claimLeaseSQLs() {
		if s.lease[b], err = st.prepared(ctx, q); err != nil {
			return claimStatements{}, err
		}
	}
	return s, nil
}

// claimRows claims up to max jobs of c's queue in tx, a write transaction
// of the store: claim.sql reads the rows, then claim_lease.sql leases the
// same rows by id, which the write lock keeps as they were read. It
// returns them in claim order, as leased.
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
	n, err := leaseRows(ctx, tx, s.lease, c, raws)
	if err != nil {
		return nil, err
	}
	if n != int64(len(raws)) {
		// The transaction is rolled back: nothing is leased.
		return nil, fmt.Errorf("leased %d rows of the %d read", n, len(raws))
	}
	return raws, nil
}

// leaseRows leases raws, read by claim.sql in tx, by claim_lease.sql in
// chunks of at most the largest bucket, each padded up to its bucket with
// its first id (an id twice in an IN list is leased once), and returns how
// many rows the statements changed.
func leaseRows(ctx context.Context, tx *sql.Tx, lease []*sql.Stmt, c claimed, raws []*rawJob) (int64, error) {
	top := leaseBuckets[len(leaseBuckets)-1]
	args := make([]any, 0, 3+min(len(raws), top))
	var changed int64
	for len(raws) > 0 {
		n := min(len(raws), top)
		b := slices.IndexFunc(leaseBuckets, func(size int) bool { return size >= n })
		args = append(args[:0], c.now, c.leaseUS, c.claimID)
		for _, r := range raws[:n] {
			args = append(args, r.idArg)
		}
		for range leaseBuckets[b] - n {
			args = append(args, raws[0].idArg)
		}
		res, err := tx.StmtContext(ctx, lease[b]).ExecContext(ctx, args...)
		if err != nil {
			return changed, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return changed, err
		}
		changed += k
		raws = raws[n:]
	}
	return changed, nil
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
