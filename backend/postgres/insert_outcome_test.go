package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

// insertClient is a client that only inserts.
func insertClient(t *testing.T, be *postgres.Backend) *spool.Client {
	t.Helper()
	c, err := spool.NewClient(be, &spool.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInsertReplyLostIsOutcomeUnknown: an insert whose reply is lost after
// the server ran it fails with ErrOutcomeUnknown, and it did commit: the
// case the error exists to warn of.
func TestInsertReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	// The second insert must reuse the first one's connection, sent before
	// the proxy drops replies: the waker of wake-ups after commit would
	// take that connection for the first insert's notification meanwhile,
	// and the insert would need a new one, whose connect fails (not
	// written). Notifying in the insert keeps the pool to the inserts.
	pbe, proxy := proxiedBackendWith(t, be, postgres.Options{Wake: postgres.WakeAtCommit})
	c := insertClient(t, pbe)
	ctx := context.Background()
	if _, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	proxy.DropReplies()
	_, err := c.Insert(ctx, conformance.NoteArgs{N: 2}, nil)
	if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
		t.Fatalf("insert whose reply was lost: got %v, want ErrOutcomeUnknown", err)
	}
	if got := countNotes(t, be); got != 2 {
		t.Fatalf("jobs stored: %d, want 2 (the insert whose reply was lost committed)", got)
	}
}

// TestInsertWithoutServerIsNotWritten: with the server unreachable, an
// insert that needs a new connection fails with ErrNotWritten and writes
// nothing. An insert sent on a pooled connection the outage closed may
// fail either way (it was written to a dead socket), never with a raw error.
func TestInsertWithoutServerIsNotWritten(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	pbe, proxy := proxiedBackend(t, be)
	c := insertClient(t, pbe)
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
	proxy.Restore()
	if got := countNotes(t, be); got != 1 {
		t.Fatalf("jobs stored: %d, want 1", got)
	}
}

// TestInsertDuringServerRestarts inserts from several goroutines while a
// PostgreSQL server of the test's own restarts (fast, immediate, fast).
// Every failed insert says whether it may have committed, and says it
// truly: a batch reported not written is absent, a successful one present,
// and a batch of unknown outcome is all there or all absent.
func TestInsertDuringServerRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters, err := dbserver.StartClusters(ctx, 1, "spool-pg-restart-", dbserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clusters.Stop(); err != nil {
			t.Error(err)
		}
	})
	srv := clusters.Servers[0]
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	be, err := postgres.New(pool, &postgres.Options{Schema: "spool"})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c := insertClient(t, be)

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
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				size := 1
				if i%2 == 1 {
					size = 5 // odd rounds insert a batch
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
		}(g)
	}
	// Each restart waits for inserts to succeed again after the last.
	waitForInserts := func() {
		from := ok.Load()
		deadline := time.Now().Add(60 * time.Second)
		for ok.Load() < from+20 {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("inserts did not recover within 60 s of a restart")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, mode := range []string{"fast", "immediate", "fast"} {
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
	rows, err := pool.Query(ctx, `SELECT (args->>'n')::int FROM spool.spool_jobs`)
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

// countNotes counts the jobs in be's schema.
func countNotes(t *testing.T, be *postgres.Backend) int {
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
