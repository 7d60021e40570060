package postgres_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

// insertClient is a client that only inserts.
func insertClient(t *testing.T, be *postgres.Backend) *spool.Client {
	t.Helper()
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInsertReplyLostIsOutcomeUnknown: an insert whose reply is lost after
// the server ran it fails with ErrOutcomeUnknown, and it did commit: the
// case the error exists to warn of.
func TestInsertReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	// The second insert must reuse the first one's connection, sent before
	// the proxy drops replies: the waker of wake-ups after commit would
	// take that connection for the first insert's notification meanwhile,
	// and the insert would need a new one, whose connect fails (not
	// written). Notifying in the insert keeps the pool to the inserts.
	pbe, proxy := proxiedBackendWith(t, be, postgres.Options{Wake: postgres.WakeAtCommit})
	conformance.InsertReplyLost(t, faultsThrough(t, be, insertClient(t, pbe), proxy))
}

// TestInsertWithoutServerIsNotWritten: with the server unreachable, an
// insert that needs a new connection fails with ErrNotWritten and writes
// nothing. An insert sent on a pooled connection the outage closed may
// fail either way (it was written to a dead socket), never with a raw error.
func TestInsertWithoutServerIsNotWritten(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	pbe, proxy := proxiedBackend(t, be)
	conformance.InsertWithoutServer(t, faultsThrough(t, be, insertClient(t, pbe), proxy))
}

// TestInsertDuringServerRestarts inserts from several goroutines while a
// PostgreSQL server of the test's own restarts (fast, immediate, fast).
// Every failed insert says whether it may have committed, and says it
// truly: a batch reported not written is absent, a successful one present,
// and a batch of unknown outcome is all there or all absent.
func TestInsertDuringServerRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters, err := dbserver.StartClusters(ctx, 1, "spool-pg-restart-", dbserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clusters.Stop(); err != nil {
			t.Error(err)
		}
	})
	srv := clusters.Servers[0]
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	be, err := postgres.New(pool, &postgres.Options{Schema: "spool"})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.InsertDuringRestarts(t, conformance.Restarts{
		Client:  insertClient(t, be),
		Modes:   []string{"fast", "immediate", "fast"},
		Restart: srv.Restart,
		Recover: 60 * time.Second,
		Stored: func(ctx context.Context) (map[int]bool, error) {
			rows, err := pool.Query(ctx, `SELECT (args->>'n')::int FROM spool.spool_jobs`)
			if err != nil {
				return nil, err
			}
			ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
			stored := make(map[int]bool, len(ns))
			for _, n := range ns {
				stored[n] = true
			}
			return stored, err
		},
	})
}
