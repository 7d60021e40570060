package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestOpenWaitsForServer starts a worker's backend.Open while its
// PostgreSQL server is down, starts the server once Open has logged a
// failed try, and shows Open comes up and the client works a job.
func TestOpenWaitsForServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Not t.TempDir: its parent is private to this user, and the server
	// runs as postgres when the tests run as root.
	dir, err := os.MkdirTemp("", "spool-pg-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := dbserver.StartPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	logs := conformance.NewWarnings()
	opened := make(chan error, 1)
	var be backend.Backend
	go func() {
		var err error
		be, err = backend.OpenWith(ctx, srv.URL(), backend.OpenOptions{Logger: slog.New(logs)})
		opened <- err
	}()
	select {
	case <-logs.First():
	case err := <-opened:
		t.Fatalf("open with the server down returned before a retry: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open once the server is up: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	text := logs.Text()
	if !strings.Contains(text, "cannot open the store yet; trying again") || !strings.Contains(text, "connection refused") ||
		!strings.Contains(text, "next_try_in=") {
		t.Fatalf("the retry's log does not say what failed, why, and when the next try is:\n%s", text)
	}
	if err := be.(*postgres.Backend).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	worked := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[conformance.NoteArgs]) error {
		worked <- j.ID
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: conformance.TestLogger(t, slog.LevelInfo), Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if id := <-worked; id != ins.ID {
		t.Fatalf("worked job %d, want %d", id, ins.ID)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if j, err := c.JobGet(ctx, ins.ID); err != nil || j.State != spool.JobStateCompleted {
		t.Fatalf("job after the run: %+v %v", j, err)
	}
}

// TestOpenDoesNotRetryMissingDatabase: a database that does not exist is
// an operator's to fix: Open fails at its first try, without ErrUnavailable.
func TestOpenDoesNotRetryMissingDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/spool_no_such_database"
	logs := conformance.NewWarnings()
	_, err = backend.OpenWith(context.Background(), u.String(), backend.OpenOptions{Logger: slog.New(logs)})
	if err == nil || errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("open of a missing database: got %v, want a final error saying it does not exist", err)
	}
	if text := logs.Text(); text != "" {
		t.Fatalf("a final error was retried:\n%s", text)
	}
	// A closed port is worth waiting for, until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = backend.OpenWith(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable", backend.OpenOptions{Logger: conformance.TestLogger(t, slog.LevelInfo)})
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open of a closed port: got %v, want ErrUnavailable and the context's deadline", err)
	}
}

// TestStartWaitsForServer: a client whose database goes down between
// opening and Start waits in Start, logging why, and works a job once the
// server is back.
func TestStartWaitsForServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "spool-pg-start-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := dbserver.StartPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	be, err := postgres.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	worked := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[conformance.NoteArgs]) error {
		worked <- j.ID
		return nil
	}))
	logs := conformance.NewWarnings()
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: slog.New(logs), Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- c.Start(ctx) }()
	select {
	case <-logs.First():
	case err := <-started:
		t.Fatalf("start with the server down returned before a retry: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatalf("start once the server is up: %v", err)
	}
	if text := logs.Text(); !strings.Contains(text, "cannot start yet: the store is unavailable; trying again") || !strings.Contains(text, "next_try_in=") {
		t.Fatalf("the retry's log does not say what failed and when the next try is:\n%s", text)
	}
	if id := <-worked; id != ins.ID {
		t.Fatalf("worked job %d, want %d", id, ins.ID)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
