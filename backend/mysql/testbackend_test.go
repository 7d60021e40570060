package mysql_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// newBackend returns a backend on its own migrated database, dropped when
// the test ends. params are added to the URL (spool_claim=optimistic, …).
func newBackend(t testing.TB, params url.Values) *mysql.Backend {
	t.Helper()
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, params)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return be
}

// openBackend opens another backend on an existing database, closed when
// the test ends (before the database is dropped).
func openBackend(t testing.TB, database string, params url.Values) *mysql.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, opts, err := mysql.ParseURL(testdb.MySQLDatabaseURL(database, params))
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	// The backend's notices (the driver's among them) are shown only if the
	// test fails.
	opts.Logger = conformance.TestLogger(t, slog.LevelWarn)
	be, err := mysql.OpenConfig(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

// openURL opens a backend on rawURL (a proxy's, a server of the test's
// own), logging like openBackend, closed when the test ends.
func openURL(t testing.TB, rawURL string) *mysql.Backend {
	t.Helper()
	cfg, opts, err := mysql.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	opts.Logger = conformance.TestLogger(t, slog.LevelWarn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, err := mysql.OpenConfig(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}
