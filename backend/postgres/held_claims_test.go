package postgres_test

import (
	"context"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/conformance"
)

// heldClaims is a PostgreSQL backend whose claims pass a
// conformance.ClaimGate (Harness.HoldClaims); the embedded backend keeps
// its Notifier and other optional interfaces.
type heldClaims struct {
	*postgres.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}

// heldShardClaims is heldClaims for the sharded backend over PostgreSQL
// clusters (TestSharded).
type heldShardClaims struct {
	*shard.Backend
	*conformance.ClaimGate
}

func (h heldShardClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
