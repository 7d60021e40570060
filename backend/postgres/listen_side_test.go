package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestNotesRideTheListener: while Listen listens, a routing note and a
// passed-on wake-up go out on its connection, not through the pool, so
// that a process whose claims and outcome writes hold the pool's
// connections opens no other backend for its note every second. Here the
// pool's one connection is held by the test: through the pool, Announce
// would wait for it until its context ends.
func TestNotesRideTheListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema's cleanup, which uses it
	be := newBackendOn(t, pool)

	heard := make(chan backend.Wake, 64)
	ready := make(chan struct{})
	lctx, stopListen := context.WithCancel(ctx)
	listened := make(chan error, 1)
	go func() {
		listened <- be.Listen(lctx, func() { close(ready) }, func(w backend.Wake) {
			if w.Note != "" || w.Hops > 0 {
				heard <- w
			}
		})
	}()
	defer func() {
		stopListen()
		if err := <-listened; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("listen: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-listened:
		t.Fatalf("listen ended before it was ready: %v", err)
	}
	// Listen took the pool's connection for itself; the test takes the
	// one the pool opens next, its only one.
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	for i, send := range []func(context.Context) error{
		func(ctx context.Context) error { return be.Announce(ctx, "member|riding") },
		func(ctx context.Context) error { return be.PassOn(ctx, "riding", 1) },
		func(ctx context.Context) error { return be.Announce(ctx, "member|riding-again") },
	} {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		err := send(sctx)
		scancel()
		if err != nil {
			t.Fatalf("notification %d with every pool connection taken: %v", i, err)
		}
	}
	want := []string{"note member|riding", "pass riding", "note member|riding-again"}
	for _, w := range want {
		select {
		case got := <-heard:
			desc := "note " + got.Note
			if got.Note == "" {
				desc = "pass " + got.Queue
			}
			if desc != w {
				t.Fatalf("heard %q, want %q", desc, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not heard within 10 s", w)
		}
	}
}
