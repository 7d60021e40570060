package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestPoolWaitCancelledIsNotWritten: a write whose context ends while it
// waits for a pool connection sent nothing, so it fails with
// ErrNotWritten, not ErrOutcomeUnknown, and writes nothing.
func TestPoolWaitCancelledIsNotWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	be := newBackendOn(t, pool)
	c := insertClient(t, be)
	first, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}

	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(context.Context) error{
		"Insert": func(ctx context.Context) error {
			_, err := c.Insert(ctx, conformance.NoteArgs{N: 2}, nil)
			return err
		},
		"Insert debounced": func(ctx context.Context) error {
			_, err := c.Insert(ctx, conformance.NoteArgs{N: 3}, &spool.InsertOpts{Unique: &spool.UniqueOpts{
				Key: "pw", Debounce: &spool.DebounceOpts{Window: time.Minute}}})
			return err
		},
		"JobCancel": func(ctx context.Context) error { _, err := c.JobCancel(ctx, first.ID); return err },
	} {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := write(wctx)
		cancel()
		if err == nil {
			t.Fatalf("%s: succeeded with the pool's one connection held", name)
		}
		if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
			t.Errorf("%s cut off waiting for a connection: %v; want ErrNotWritten, not ErrOutcomeUnknown", name, err)
		}
	}
	held.Release()

	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+be.Schema()+".spool_jobs WHERE state <> 'cancelled'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d jobs not cancelled, want the one inserted before", n)
	}
}
