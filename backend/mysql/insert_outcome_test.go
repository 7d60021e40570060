package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
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
	proxied, err = mysql.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxied.Close() })
	return direct, proxied, proxy
}

func insertOnlyClient(t *testing.T, be *mysql.Backend) *spool.Client {
	t.Helper()
	c, err := spool.NewClient(be, &spool.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jobCount(t *testing.T, be *mysql.Backend) int {
	t.Helper()
	stats, err := be.QueueStatsAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range stats {
		for _, c := range s.Counts {
			n += int(c)
		}
	}
	return n
}

// TestInsertReplyLostIsOutcomeUnknown: a one-statement insert whose reply
// is lost after the server ran it fails with ErrOutcomeUnknown, and it did
// commit. A batch of several statements whose connection fails before its
// COMMIT fails with ErrNotWritten, and nothing of it is stored.
func TestInsertReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	c := insertOnlyClient(t, proxied)
	ctx := context.Background()
	if _, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	proxy.DropReplies()
	_, err := c.Insert(ctx, conformance.NoteArgs{N: 2}, nil)
	if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
		t.Fatalf("insert whose reply was lost: got %v, want ErrOutcomeUnknown", err)
	}
	if got := jobCount(t, direct); got != 2 {
		t.Fatalf("jobs stored: %d, want 2 (the insert whose reply was lost committed)", got)
	}

	// 1,001 jobs take two statements, so the batch runs in a transaction.
	proxy.Restore()
	params := make([]spool.InsertManyParams, 1001)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: conformance.NoteArgs{N: 10 + i}}
	}
	proxy.DropReplies()
	_, err = c.InsertMany(ctx, params)
	if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
		t.Fatalf("batch cut before its commit: got %v, want ErrNotWritten", err)
	}
	if got := jobCount(t, direct); got != 2 {
		t.Fatalf("jobs stored: %d, want 2 (the batch cut before its commit wrote nothing)", got)
	}
}

// TestInsertWithoutServerIsNotWritten: with the server unreachable, an
// insert that needs a new connection fails with ErrNotWritten and writes
// nothing; one sent on a pooled connection the outage closed may fail
// either way, never with a raw error.
func TestInsertWithoutServerIsNotWritten(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	c := insertOnlyClient(t, proxied)
	ctx := context.Background()
	if _, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	notWritten := false
	for i := 0; i < 3 && !notWritten; i++ {
		_, err := c.Insert(ctx, conformance.NoteArgs{N: 2}, nil)
		switch {
		case errors.Is(err, spool.ErrNotWritten):
			notWritten = true
		case errors.Is(err, spool.ErrOutcomeUnknown):
		default:
			t.Fatalf("insert %d with the server unreachable: got %v, want ErrNotWritten or ErrOutcomeUnknown", i, err)
		}
	}
	if !notWritten {
		t.Fatal("no insert was reported as not written while the server was unreachable")
	}
	if got := jobCount(t, direct); got != 1 {
		t.Fatalf("jobs stored: %d, want 1", got)
	}
}

// TestInsertDuringServerRestarts inserts from several goroutines while a
// mariadbd of the test's own restarts (clean, kill -9, clean). Every failed
// insert says whether it may have committed, and says it truly.
func TestInsertDuringServerRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "spool-mariadb-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := dbserver.StartMariaDB(ctx, dir)
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
	cfg.Logger = &drv.NopLogger{} // the restarts' broken connections are expected here
	connector, err := drv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := sql.OpenDB(connector)
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE spool CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	u.Path = "/spool"
	be, err := mysql.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c := insertOnlyClient(t, be)

	type attempt struct {
		ns  []int
		err error
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		next     atomic.Int64
		ok       atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				size := 1
				if i%2 == 1 {
					size = 5
				}
				ns := make([]int, size)
				params := make([]spool.InsertManyParams, size)
				for k := range ns {
					ns[k] = int(next.Add(1))
					params[k] = spool.InsertManyParams{Args: conformance.NoteArgs{N: ns[k]}}
				}
				ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
				var err error
				if size == 1 {
					_, err = c.Insert(ictx, params[0].Args, nil)
				} else {
					_, err = c.InsertMany(ictx, params)
				}
				cancel()
				if err == nil {
					ok.Add(1)
				}
				mu.Lock()
				attempts = append(attempts, attempt{ns, err})
				mu.Unlock()
			}
		}()
	}
	waitForInserts := func() {
		from := ok.Load()
		deadline := time.Now().Add(90 * time.Second)
		for ok.Load() < from+20 {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("inserts did not recover within 90 s of a restart")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, mode := range []string{"clean", "kill", "clean"} {
		waitForInserts()
		if err := srv.Restart(ctx, mode); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	waitForInserts()
	close(stop)
	wg.Wait()

	stored := map[int]bool{}
	rows, err := admin.QueryContext(ctx, "SELECT CAST(JSON_VALUE(args, '$.n') AS SIGNED) FROM spool.spool_jobs")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		stored[n] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var failed, notWritten, unknown, unknownCommitted int
	for _, a := range attempts {
		present := 0
		for _, n := range a.ns {
			if stored[n] {
				present++
			}
		}
		desc := fmt.Sprintf("insert of %d job(s) from %d", len(a.ns), a.ns[0])
		switch {
		case a.err == nil:
			if present != len(a.ns) {
				t.Errorf("%s succeeded but %d of its jobs are stored", desc, present)
			}
			continue
		case errors.Is(a.err, spool.ErrNotWritten) && errors.Is(a.err, spool.ErrOutcomeUnknown):
			t.Errorf("%s: both not written and of unknown outcome: %v", desc, a.err)
		case errors.Is(a.err, spool.ErrNotWritten):
			notWritten++
			if present != 0 {
				t.Errorf("%s reported not written, but %d of its jobs are stored: %v", desc, present, a.err)
			}
		case errors.Is(a.err, spool.ErrOutcomeUnknown):
			unknown++
			if present != 0 && present != len(a.ns) {
				t.Errorf("%s of unknown outcome is half stored (%d jobs): %v", desc, present, a.err)
			}
			if present > 0 {
				unknownCommitted++
			}
		default:
			t.Errorf("%s failed without saying whether it may have committed: %v", desc, a.err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatalf("no insert failed across three restarts: the test did not exercise the fault (%d inserts)", len(attempts))
	}
	t.Logf("%d inserts, %d failed: %d not written, %d of unknown outcome (%d of them committed)",
		len(attempts), failed, notWritten, unknown, unknownCommitted)
}
