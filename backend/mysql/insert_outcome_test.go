package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// proxiedMySQL returns a migrated backend on a new database, and a second
// backend on the same database that connects through a proxy.
func proxiedMySQL(t *testing.T) (direct, proxied *mysql.Backend, proxy *testdb.Proxy) {
	t.Helper()
	name := testdb.NewMySQLDatabase(t)
	direct = openBackend(t, name, nil)
	if err := direct.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testdb.MySQLDatabaseURL(name, nil))
	if err != nil {
		t.Fatal(err)
	}
	proxy = testdb.NewProxyTo(t, u.Host)
	u.Host = proxy.Addr()
	return direct, openURL(t, u.String()), proxy
}

// ownMariaDB starts a mariadbd of the test's own in a new directory named
// after prefix, stopped and removed when t ends, and returns it, a database
// handle on it as root (its driver logging to logger, if not nil) and its
// URL.
func ownMariaDB(t *testing.T, prefix string, logger drv.Logger) (*dbserver.MariaDB, *sql.DB, *url.URL) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := dbserver.StartMariaDB(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := drv.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", u.Host
	if logger != nil {
		cfg.Logger = logger
	}
	connector, err := drv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, sql.OpenDB(connector), u
}

func insertOnlyClient(t *testing.T, be *mysql.Backend) *spool.Client {
	t.Helper()
	c, err := spool.NewClient(be, &spool.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInsertReplyLostIsOutcomeUnknown: a one-statement insert whose reply
// is lost after the server ran it fails with ErrOutcomeUnknown, and it did
// commit. A batch of several statements whose connection fails before its
// COMMIT fails with ErrNotWritten, and nothing of it is stored.
func TestInsertReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := proxiedFaults(t)
	conformance.InsertReplyLost(t, f)
	ctx := context.Background()

	// 1,001 jobs take two statements, so the batch runs in a transaction.
	f.Proxy.Restore()
	params := make([]spool.InsertManyParams, 1001)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: conformance.NoteArgs{N: 10 + i}}
	}
	f.Proxy.DropReplies()
	_, err := f.Client.InsertMany(ctx, params)
	if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
		t.Fatalf("batch cut before its commit: got %v, want ErrNotWritten", err)
	}
	if got := conformance.CountJobs(t, f.Direct); got != 2 {
		t.Fatalf("jobs stored: %d, want 2 (the batch cut before its commit wrote nothing)", got)
	}
}

// TestInsertWithoutServerIsNotWritten: with the server unreachable, an
// insert that needs a new connection fails with ErrNotWritten and writes
// nothing; one sent on a pooled connection the outage closed may fail
// either way, never with a raw error.
func TestInsertWithoutServerIsNotWritten(t *testing.T) {
	t.Parallel()
	conformance.InsertWithoutServer(t, proxiedFaults(t))
}

// TestInsertDuringServerRestarts inserts from several goroutines while a
// mariadbd of the test's own restarts (clean, kill -9, clean). Every failed
// insert says whether it may have committed, and says it truly.
func TestInsertDuringServerRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The restarts' broken connections are expected here.
	srv, admin, u := ownMariaDB(t, "spool-mariadb-restart-", &drv.NopLogger{})
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE spool CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	u.Path = "/spool"
	be := openURL(t, u.String())
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conformance.InsertDuringRestarts(t, conformance.Restarts{
		Client:  insertOnlyClient(t, be),
		Modes:   []string{"clean", "kill", "clean"},
		Restart: srv.Restart,
		Recover: 90 * time.Second,
		Stored: func(ctx context.Context) (map[int]bool, error) {
			rows, err := admin.QueryContext(ctx, "SELECT CAST(JSON_VALUE(args, '$.n') AS SIGNED) FROM spool.spool_jobs")
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			stored := map[int]bool{}
			for rows.Next() {
				var n int
				if err := rows.Scan(&n); err != nil {
					return nil, err
				}
				stored[n] = true
			}
			return stored, rows.Err()
		},
	})
}
