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

// newBackend returns a backend on a migrated database of the test's own,
// kept between the process's tests and emptied to its migrated state when
// the test ends (testdb.MigratedMySQLDatabase). params are added to the URL
// (spool_claim=optimistic, …).
func newBackend(t testing.TB, params url.Values) *mysql.Backend {
	t.Helper()
	name := testdb.MigratedMySQLDatabase(t, "spool", func(ctx context.Context, database string) error {
		be, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(database, nil))
		if err != nil {
			return err
		}
		defer be.Close()
		return be.Migrate(ctx)
	})
	return openBackend(t, name, params)
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
