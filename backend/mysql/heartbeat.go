package mysql

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// JobHeartbeatMany implements backend.Backend: one UPDATE extends every
// live lease. When it matches fewer rows than leases were sent, a read finds
// the ones still held: a lease running at the read held at the update too,
// since a fence only ever grows.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	ls := slices.Clone(p.Leases)
	slices.SortFunc(ls, func(a, b backend.LeaseRef) int { return cmpID(a.ID, b.ID) })
	ids := make([]int64, len(ls))
	fences := make([]int32, len(ls))
	for i, l := range ls {
		ids[i], fences[i] = l.ID, l.Fence
	}
	var matched int64
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.heartbeat+inList(ids)+leaseGuard(ids, fences), micros(p.Lease))
		if err != nil {
			return err
		}
		matched, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", connWriteError(err, true))
	}
	if int(matched) == len(ls) {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	var held map[backend.LeaseRef]bool
	err = b.retry(ctx, func() error {
		rows, err := b.db.QueryContext(ctx, b.sql.heartbeatCheck+inList(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		held = make(map[backend.LeaseRef]bool, len(ids))
		for rows.Next() {
			var l backend.LeaseRef
			if err := rows.Scan(&l.ID, &l.Fence); err != nil {
				return err
			}
			held[l] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	res := &backend.JobHeartbeatManyResult{}
	for _, l := range ls {
		if !held[l] {
			res.Lost = append(res.Lost, l)
		}
	}
	return res, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	var n int64
	err := b.retry(ctx, func() error {
		res, err := b.db.ExecContext(ctx, b.sql.record, backend.NullText(p.Output), backend.NullText(p.Metadata), p.Lease.ID, p.Lease.Fence)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	return n == 1, nil
}
