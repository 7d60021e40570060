package memory_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// harnessTx adapts *memory.Tx to conformance.Tx and BackendTxer.
type harnessTx struct{ *memory.Tx }

// BackendTx implements conformance.BackendTxer.
func (t harnessTx) BackendTx() backend.Tx { return t.Tx }

func harness() conformance.Harness {
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			be := memory.New()
			t.Cleanup(func() { _ = be.Close() })
			return be
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			other := be.(*memory.Backend).Reopen()
			t.Cleanup(func() { _ = other.Close() })
			return other
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*memory.Backend), gate}
		},
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			return harnessTx{be.(*memory.Backend).Begin()}
		},
		Exceptions: map[string]string{"InsertUnmigrated": "a store in memory has no schema to migrate: it is usable, and reports itself migrated, from the moment it exists"},
	}
}

// TestConformance runs the whole conformance suite on the memory backend.
func TestConformance(t *testing.T) { conformance.Run(t, harness()) }

// TestOpenByURL: memory://NAME opens one shared store per name.
func TestOpenByURL(t *testing.T) {
	ctx := context.Background()
	a, err := backend.Open(ctx, "memory://shared-by-url")
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(ctx, "memory://shared-by-url")
	if err != nil {
		t.Fatal(err)
	}
	other, err := backend.Open(ctx, "memory://another")
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{Queue: "default", Kind: "k", Args: []byte(`{}`), MaxAttempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JobGet(ctx, res.IDs[0]); err != nil {
		t.Errorf("a job inserted through one handle of memory://shared-by-url is not seen by another: %v", err)
	}
	if _, err := other.JobGet(ctx, res.IDs[0]); err == nil {
		t.Error("memory://another sees the job of memory://shared-by-url")
	}
}

// heldClaims is a memory store whose claims pass a conformance.ClaimGate
// (Harness.HoldClaims); the embedded backend keeps its optional interfaces.
type heldClaims struct {
	*memory.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
