package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// newBackend returns a backend on its own migrated schema, dropped when the
// test ends.
func newBackend(t testing.TB) *postgres.Backend {
	t.Helper()
	return newBackendWithMode(t, pgx.QueryExecModeCacheStatement)
}

// newBackendWithMode is newBackend over a pool using the given query
// execution mode (QueryExecModeSimpleProtocol is what PgBouncer before 1.21
// needs).
func newBackendWithMode(t testing.TB, mode pgx.QueryExecMode) *postgres.Backend {
	t.Helper()
	return newBackendOn(t, testdb.PostgresPoolWithMode(t, mode))
}

// unmigratedSchema names a schema of the test's own that does not exist
// yet (as before a first spool migrate), dropped when the test ends if it
// was created meanwhile.
func unmigratedSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := testdb.NewSchemaName()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	return schema
}

// newUnmigratedOn returns a backend through pool on the schema opts names,
// never migrated.
func newUnmigratedOn(t testing.TB, pool *pgxpool.Pool, opts *postgres.Options) *postgres.Backend {
	t.Helper()
	be, err := postgres.New(pool, opts)
	if err != nil {
		t.Fatalf("new backend: %v", err)
	}
	return be
}

// newBackendOn returns a backend on a migrated schema of the test's own
// through pool (the test's): one kept between the process's tests, emptied
// to its migrated state when the test ends (testdb.MigratedSchema).
func newBackendOn(t testing.TB, pool *pgxpool.Pool) *postgres.Backend {
	t.Helper()
	schema := testdb.MigratedSchema(t, pool, "spool", func(ctx context.Context, schema string) error {
		be, err := postgres.New(pool, &postgres.Options{Schema: schema})
		if err != nil {
			return err
		}
		return be.Migrate(ctx)
	})
	be, err := postgres.New(pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("new backend: %v", err)
	}
	return be
}

// newFreshBackendOn returns a backend on a freshly migrated schema of the
// test's own through pool, dropped when the test ends. The sharded
// conformance run uses it: with kept schemas, a shard's heartbeats failed
// for the rest of the first test they met in two CI runs
// (TestSharded/ConformanceByKey/HeartbeatKeepsLongJob), which the runs on
// one server never showed; until that is understood the sharded run
// migrates its schemas as before.
func newFreshBackendOn(t testing.TB, pool *pgxpool.Pool) *postgres.Backend {
	t.Helper()
	schema := testdb.NewSchemaName()
	be, err := postgres.New(pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("new backend: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	testdb.DropSchemaAtEnd(t, pool, schema)
	return be
}
