package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/backend"
)

// JobHeartbeatMany implements backend.Backend.
func (b *Backend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var alive []backend.LeaseRef
	for _, l := range p.Leases {
		if j, ok := s.held(l); ok {
			if until := t.Add(p.Lease); j.LeasedUntil == nil || until.After(*j.LeasedUntil) {
				j.LeasedUntil = timePtr(until)
			}
			alive = append(alive, l)
		}
	}
	return &backend.JobHeartbeatManyResult{Lost: backend.Unapplied(p.Leases, alive, func(l backend.LeaseRef) backend.LeaseRef { return l })}, nil
}

// JobRecord implements backend.Backend.
func (b *Backend) JobRecord(ctx context.Context, p *backend.JobRecordParams) (bool, error) {
	if err := b.check(); err != nil {
		return false, fmt.Errorf("record job %d: %w", p.Lease.ID, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.held(p.Lease)
	if !ok {
		return false, nil
	}
	if p.Output != nil {
		j.Output = slices.Clone(p.Output)
	}
	if p.Metadata != nil {
		j.Metadata = slices.Clone(p.Metadata)
	}
	return true, nil
}
