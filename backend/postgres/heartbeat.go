package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	ls := slices.Clone(p.Leases)
	slices.SortFunc(ls, func(a, b backend.LeaseRef) int { return int(a.ID - b.ID) })
	ids := make([]int64, len(ls))
	fences := make([]int32, len(ls))
	for i, l := range ls {
		ids[i], fences[i] = l.ID, l.Fence
	}
	done, err := b.routed(ids, fences, func(idx []int) ([]backend.LeaseRef, error) {
		return b.heartbeatRows(ctx, b.sql.heartbeatLeased, pick(ids, idx), pick(fences, idx), p.Lease)
	}, func(idx []int) ([]backend.LeaseRef, error) {
		return b.heartbeatRows(ctx, b.sql.heartbeat, pick(ids, idx), pick(fences, idx), p.Lease)
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", ownWriteError(true, err))
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(ls, done, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// heartbeatRows runs heartbeat.sql or heartbeat_leased.sql.
func (b *Backend) heartbeatRows(ctx context.Context, query string, ids []int64, fences []int32, lease time.Duration) ([]backend.LeaseRef, error) {
	var done []backend.LeaseRef
	err := b.queryBatch(ctx, b.pool, query, false, len(ids), func(rows pgx.Rows) (err error) {
		done, err = collectLeases(rows)
		return err
	}, ids, fences, micros(lease))
	return done, err
}

// JobRecord implements backend.Backend. A job held in a lease row is moved
// back into spool_jobs first: records are rare beside claims, and one row
// in place keeps a lease row's jobs unchanged.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	record := func() (bool, error) {
		tag, err := b.pool.Exec(ctx, b.sql.record, p.Lease.ID, p.Lease.Fence, backend.NullText(p.Output), backend.NullText(p.Metadata))
		return tag.RowsAffected() == 1, err
	}
	ok, err := record()
	if err == nil && !ok {
		var moved int
		if err = b.pool.QueryRow(ctx, b.sql.unleaseJobs, []int64{p.Lease.ID}).Scan(&moved); err == nil && moved > 0 {
			ok, err = record()
		}
	}
	if err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	return ok, nil
}
