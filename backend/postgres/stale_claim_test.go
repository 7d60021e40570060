package postgres_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
)

// heldClaims is a PostgreSQL backend whose claims pass a
// conformance.ClaimGate; the embedded *postgres.Backend keeps its
// Notifier and other optional interfaces.
type heldClaims struct {
	*postgres.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}

// TestResumeWithClaimInFlight is conformance.ResumeWithClaimInFlight in
// the mode of TestConformanceLeaseRows, where PauseRunningClient failed
// once under load (lease rows, no claim lock, no wake routing), with the
// pause, the inserts and the resume sent by another process: a claim that
// found the queue paused, held in flight across the resume, must not leave
// the jobs that waited for it to the hourly poll.
func TestResumeWithClaimInFlight(t *testing.T) {
	h := harnessWith(postgres.Options{Claims: postgres.ClaimsLeaseRows, ClaimLock: postgres.ClaimLockOff, WakeRouting: postgres.WakeRoutingOff})
	inner := h.NewBackend(t)
	gate := conformance.NewClaimGate()
	conformance.ResumeWithClaimInFlight(t, heldClaims{inner.(*postgres.Backend), gate}, gate, h.Reopen(t, inner))
}
