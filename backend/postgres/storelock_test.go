package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// lockStore takes every table of be's schema in ACCESS EXCLUSIVE mode, in a
// transaction of a pool of its own (another session): every statement of
// the backend's calls waits behind it (conformance.Harness.Lock).
func lockStore(t *testing.T, be backend.Backend) conformance.StoreLock {
	ctx := context.Background()
	schema := be.(*postgres.Backend).Schema()
	pool := testdb.PostgresPool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("lock: begin: %v", err)
	}
	var tables []string
	rows, err := tx.Query(ctx, `SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables WHERE schemaname = $1`, schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("lock: list the tables: %v", err)
	}
	for _, table := range tables {
		if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("lock %s: %v", table, err)
		}
	}
	return conformance.StoreLock{
		Waiting: func(ctx context.Context) (bool, error) {
			var waiting bool
			err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT l.granted AND n.nspname = $1)`, schema).Scan(&waiting)
			return waiting, err
		},
		Unlock: func() { _ = tx.Rollback(context.Background()) },
	}
}
