package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

type noSlotArgs struct{}

func (noSlotArgs) Kind() string { return "no_slot" }

// TestNoConnectionFree runs against a server of its own with
// max_connections 4, all of them taken by other sessions: an insert fails
// with an error that matches ErrNotWritten and ErrUnavailable and says the
// server has no connection free; a client's Start warns that it cannot
// start yet, saying so, and tries again: once slots are free it starts,
// claims and works a job.
func TestNoConnectionFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Not t.TempDir: its parent is private to this user, and the server
	// runs as postgres when the tests run as root.
	dir, err := os.MkdirTemp("", "spool-pg-noslot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := dbserver.StartPostgresWith(ctx, dir, dbserver.Options{MaxConnections: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	be, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool gives its connections back; other sessions take every slot.
	pool.Reset()
	var held []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close(ctx)
		}
	})
	for {
		c, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			if !strings.Contains(err.Error(), "53300") {
				t.Fatalf("taking the server's slots: %v", err)
			}
			break
		}
		held = append(held, c)
		if len(held) > 4 {
			t.Fatalf("%d sessions open on a server with max_connections 4", len(held))
		}
	}

	_, err = be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
		Queue: "default", Kind: "no_slot", Args: []byte(`{}`), MaxAttempts: 3,
	}}})
	if !errors.Is(err, backend.ErrNotWritten) || !errors.Is(err, backend.ErrUnavailable) ||
		!strings.Contains(err.Error(), "no connection free") {
		t.Fatalf("insert with no connection free: %v; want ErrNotWritten and ErrUnavailable, saying no connection is free", err)
	}

	logs := conformance.NewWarnings()
	done := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[noSlotArgs]) error {
		done <- j.ID
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger: slog.New(logs), PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- c.Start(ctx) }()
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	select {
	case <-logs.First():
	case err := <-started:
		t.Fatalf("start with no connection free returned before a warning: %v", err)
	}
	if text := logs.Text(); !strings.Contains(text, "no connection free") {
		t.Fatalf("warnings do not say the server has no connection free:\n%s", text)
	}
	// Slots free again: the client claims and works a job.
	for _, c := range held {
		_ = c.Close(ctx)
	}
	held = nil
	if err := <-started; err != nil {
		t.Fatalf("start once slots are free: %v", err)
	}
	res, err := c.Insert(ctx, noSlotArgs{}, nil)
	if err != nil {
		t.Fatalf("insert once slots are free: %v", err)
	}
	select {
	case id := <-done:
		if id != res.ID {
			t.Fatalf("worked job %d, want %d", id, res.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("job not worked in 30 s after slots were freed; warnings:\n%s", logs.Text())
	}
}
