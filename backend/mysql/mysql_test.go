package mysql_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// sqlTx adapts *sql.Tx to conformance.Tx. Its ExecContext, QueryContext and
// QueryRowContext are *sql.Tx's, so the backend accepts it as a backend.Tx.
type sqlTx struct{ *sql.Tx }

func (t sqlTx) Commit(context.Context) error   { return t.Tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.Tx.Rollback() }

// strategyParams selects a claim strategy through the URL.
func strategyParams(strategy string) url.Values {
	return url.Values{mysql.ClaimParam: {strategy}}
}

func harness(strategy string) conformance.Harness {
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			be := newBackend(t, strategyParams(strategy))
			if want := map[string]string{mysql.StrategyAuto: mysql.StrategyPessimistic}[strategy]; want != "" && be.ClaimStrategy() != want {
				t.Fatalf("auto chose %s on %s, want %s", be.ClaimStrategy(), be.ServerVersion(), want)
			}
			return be
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			// A second pool, as another process would have.
			return openBackend(t, be.(*mysql.Backend).Database(), strategyParams(strategy))
		},
		NewUnmigrated: func(t *testing.T) backend.Backend {
			return openBackend(t, testdb.NewMySQLDatabase(t), strategyParams(strategy))
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*mysql.Backend), gate}
		},
		Lock: lockStore,
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			tx, err := be.(*mysql.Backend).DB().BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			t.Cleanup(func() { _ = tx.Rollback() })
			return sqlTx{tx}
		},
	}
}

// TestConformance runs the suite with the default strategy, which on a server
// with SKIP LOCKED (MariaDB 10.6+, MySQL 8) is the pessimistic one.
func TestConformance(t *testing.T) { conformance.Run(t, harness(mysql.StrategyAuto)) }

// TestConformanceOptimistic runs the suite with the optimistic strategy.
func TestConformanceOptimistic(t *testing.T) { conformance.Run(t, harness(mysql.StrategyOptimistic)) }

// heldClaims is a MySQL backend whose claims pass a conformance.ClaimGate
// (Harness.HoldClaims); the embedded backend keeps its optional interfaces.
type heldClaims struct {
	*mysql.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
