package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend"
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

// keptBackendsAt returns a backend on a migrated schema of the test's own
// on each server of urls, each kept between the process's tests and
// emptied to its migrated state when the test ends (newBackendOn): freshly
// migrated, the sharded conformance run's three schemas a test took most
// of its subtests' time. A kept table carries its statistics from test to
// test, so plans change under the backend as in production; that once
// JIT-compiled a finish for seconds while its job's heartbeats waited
// (docs/testing.md, TestFinishAndHeartbeatNotJITCompiled).
func keptBackendsAt(t testing.TB, urls []string) []backend.Backend {
	t.Helper()
	bes := make([]backend.Backend, len(urls))
	for i, u := range urls {
		bes[i] = newBackendOn(t, testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement))
	}
	return bes
}

// newFreshBackendsAt returns a backend on a freshly migrated schema of the
// test's own on each server of urls, all dropped when the test ends, for a
// test that reads the server's statistics of its schema's statements from
// their first. The servers migrate their schemas at once, as they drop
// them.
func newFreshBackendsAt(t testing.TB, urls []string) []backend.Backend {
	t.Helper()
	pools := make([]*pgxpool.Pool, len(urls))
	schemas := make([]string, len(urls))
	for i, u := range urls {
		pools[i] = testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement)
		schemas[i] = testdb.NewSchemaName()
	}
	// Registered first, so a schema a failed migration left is dropped too.
	testdb.DropSchemasAtEnd(t, pools, schemas)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bes := make([]backend.Backend, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i := range urls {
		wg.Go(func() {
			be, err := postgres.New(pools[i], &postgres.Options{Schema: schemas[i]})
			if err == nil {
				err = be.Migrate(ctx)
			}
			bes[i], errs[i] = be, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate shard %d: %v", i, err)
		}
	}
	return bes
}
