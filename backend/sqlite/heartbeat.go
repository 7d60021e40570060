package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if len(p.Leases) == 0 {
		return &backend.JobHeartbeatManyResult{}, nil
	}
	b.st.noteLease(p.Lease)
	input := encodeLeases(p.Leases)
	var alive []backend.LeaseRef
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, stmt.heartbeat, nowMicros(), p.Lease.Microseconds(), input)
		if err != nil {
			return err
		}
		alive, err = appendLeases(alive[:0], rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat jobs: %w", err)
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(p.Leases, alive, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	var n int64
	err := b.st.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt.record, p.Lease.ID, p.Lease.Fence, backend.NullText(p.Output), backend.NullText(p.Metadata))
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
