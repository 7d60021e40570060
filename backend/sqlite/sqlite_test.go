package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/conformance"
)

// sqlTx adapts *sql.Tx to conformance.Tx.
type sqlTx struct{ *sql.Tx }

func (t sqlTx) Commit(context.Context) error   { return t.Tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.Tx.Rollback() }

// newBackend opens a migrated backend on a fresh file, closed when the test
// ends.
func newBackend(t testing.TB, opts *sqlite.Options) *sqlite.Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spool.db")
	be, err := sqlite.OpenPath(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	if err := be.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return be
}

// reopen opens a second backend on be's file with connections of its own, as
// another process would have.
func reopen(t testing.TB, be *sqlite.Backend) *sqlite.Backend {
	t.Helper()
	other, err := sqlite.OpenPath(context.Background(), be.Path(), &sqlite.Options{Separate: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { _ = other.Close() })
	return other
}

func harness() conformance.Harness {
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return newBackend(t, nil) },
		NewUnmigrated: func(t *testing.T) backend.Backend {
			be, err := sqlite.OpenPath(context.Background(), filepath.Join(t.TempDir(), "spool.db"), nil)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = be.Close() })
			return be
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			return reopen(t, be.(*sqlite.Backend))
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*sqlite.Backend), gate}
		},
		Lock: lockStore,
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			tx, err := be.(*sqlite.Backend).DB().BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			return sqlTx{tx}
		},
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness()) }

// BackendTx implements conformance.BackendTxer.
func (t sqlTx) BackendTx() backend.Tx { return t.Tx }

// heldClaims is an SQLite backend whose claims pass a conformance.ClaimGate
// (Harness.HoldClaims); the embedded backend keeps its optional interfaces.
type heldClaims struct {
	*sqlite.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
