package postgres

import (
	"context"
	"fmt"
	"slices"

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
	rows, err := b.pool.Query(ctx, b.sql.heartbeat, b.customPlan(ids, fences, micros(p.Lease))...)
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	done, err := collectLeases(rows)
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(ls, done, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	tag, err := b.pool.Exec(ctx, b.sql.record, p.Lease.ID, p.Lease.Fence, backend.NullText(p.Output), backend.NullText(p.Metadata))
	if err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}
