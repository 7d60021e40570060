package mysql_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestOpenWaitsForServer starts a worker's backend.Open while its MariaDB
// server is down, starts the server once Open has logged a failed try, and
// shows Open comes up and the client works a job.
func TestOpenWaitsForServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, admin, u := ownMariaDB(t, "spool-mariadb-open-", nil)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE spool CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	u.Path = "/spool"
	logs := conformance.NewWarnings()
	opened := make(chan error, 1)
	var be backend.Backend
	go func() {
		var err error
		be, err = backend.OpenWith(ctx, u.String(), backend.OpenOptions{Logger: slog.New(logs)})
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
	if err := be.(*mysql.Backend).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	worked := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[conformance.NoteArgs]) error {
		worked <- j.ID
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
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

// TestOpenDoesNotRetryFinalErrors: a refused password and a database that
// does not exist are an operator's to fix: Open fails at its first try,
// without ErrUnavailable.
func TestOpenDoesNotRetryFinalErrors(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.MySQLDatabaseURL("spool_no_such_database", nil))
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-the-password")
	wrongPassword.Path = "/test"
	for name, c := range map[string]struct{ dsn, want string }{
		"missing database": {u.String(), "Unknown database"},
		"wrong password":   {wrongPassword.String(), "Access denied"},
	} {
		logs := conformance.NewWarnings()
		_, err := backend.OpenWith(context.Background(), c.dsn, backend.OpenOptions{Logger: slog.New(logs)})
		if err == nil || errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a final error saying %q", name, err, c.want)
		}
		if text := logs.Text(); text != "" {
			t.Errorf("%s: a final error was retried:\n%s", name, text)
		}
	}
}
