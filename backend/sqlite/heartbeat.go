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
