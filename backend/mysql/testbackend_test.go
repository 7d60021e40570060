package mysql_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool/backend/mysql"
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
	be, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(database, params))
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}
