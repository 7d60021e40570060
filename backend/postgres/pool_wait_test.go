package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestPoolWaitCancelledIsNotWritten: a write cut off while it waits for a
// pool connection is not written (conformance.PoolWaitCancelled).
func TestPoolWaitCancelledIsNotWritten(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	be := newBackendOn(t, pool)
	conformance.PoolWaitCancelled(t, insertClient(t, be), func(ctx context.Context) (func(), error) {
		held, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return held.Release, nil
	})
}
