package mysql_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// listenWakes starts be.Listen and returns the wake-ups it delivers for
// queues ("" for a wake-up of every queue) once it is ready.
func listenWakes(t *testing.T, ctx context.Context, be *mysql.Backend) <-chan string {
	t.Helper()
	ready, wakes := make(chan struct{}), make(chan string, 1024)
	go func() {
		_ = be.Listen(ctx, func() { close(ready) }, func(w backend.Wake) {
			if w.CancelledID == 0 && w.Note == "" {
				select {
				case wakes <- w.Queue:
				default:
				}
			}
		})
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen not ready in 10 s")
	}
	return wakes
}

// awaitWake waits for a wake-up of queue from wakes; the deadline is one
// that only a missing wake-up reaches.
func awaitWake(t *testing.T, wakes <-chan string, queue, who string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case q := <-wakes:
			if q == queue {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no wake-up for queue %q in 10 s", who, queue)
		}
	}
}

// lookerSetup makes a migrated database and a client that inserts into
// it.
func lookerSetup(t *testing.T) (string, *spool.Client) {
	t.Helper()
	name := testdb.NewMySQLDatabase(t)
	if err := openBackend(t, name, lookerParams).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	inserter, err := spool.NewClient(openBackend(t, name, lookerParams), &spool.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return name, inserter
}

func lookerInsert(t *testing.T, c *spool.Client, queue string) {
	t.Helper()
	if _, err := c.Insert(context.Background(), noteArgs{}, &spool.InsertOpts{Queue: queue}); err != nil {
		t.Fatal(err)
	}
}

// lookerHeld makes the looker's row of a backend with no queues
// registered, through a listener that hears a job and stops, then sets
// its lease as held by holder, slow or not, for another d (by the
// server's clock), with its cursor at the newest job.
func lookerHeld(t *testing.T, name string, inserter *spool.Client, holder string, slow bool, d time.Duration) {
	t.Helper()
	be := openBackend(t, name, lookerParams)
	ctx, cancel := context.WithCancel(context.Background())
	wakes := listenWakes(t, ctx, be)
	lookerInsert(t, inserter, "first")
	awaitWake(t, wakes, "first", "the first listener")
	cancel() // and it gives the lease up
	db := "`" + be.Database() + "`"
	if _, err := be.DB().Exec("UPDATE "+db+".spool_looker SET holder = ?, slow = ?, "+
		"until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, cursor_id = (SELECT coalesce(max(id), 0) FROM "+db+".spool_jobs)",
		holder, slow, d.Microseconds()); err != nil {
		t.Fatal(err)
	}
}

// TestLookerTakesOverLapsedLease: when the looker's holder stops without
// giving the lease up, a listener takes the lease once it lapses: a job
// inserted while the stopped holder held it still wakes its queue, and
// every queue is woken for what that holder had read and not claimed.
func TestLookerTakesOverLapsedLease(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	lookerHeld(t, name, inserter, "gone", false, 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := listenWakes(t, ctx, openBackend(t, name, lookerParams))
	lookerInsert(t, inserter, "while_held")
	awaitWake(t, wakes, "", "the listener taking over")
	awaitWake(t, wakes, "while_held", "the listener taking over")
}

// TestLookerSlowHolderYields: a listener whose client has an idle worker
// (backend.WakeDemand) takes the lease from a holder whose client has
// none, however long that holder's lease still runs, and wakes every
// queue for what that holder read.
func TestLookerSlowHolderYields(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	lookerHeld(t, name, inserter, "busy", true, time.Hour)
	be := openBackend(t, name, lookerParams)
	defer be.AddWakeDemand(func() bool { return true })()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := listenWakes(t, ctx, be)
	lookerInsert(t, inserter, "to_the_idle")
	awaitWake(t, wakes, "", "the listener with an idle worker")
	awaitWake(t, wakes, "to_the_idle", "the listener with an idle worker")
}

// TestLookerPerQueueSet: processes that work different queues hold
// leases of their own, so each hears the jobs of its queues; two Listen
// calls of one backend (two clients on it) both hear them while the
// backend holds the lease.
func TestLookerPerQueueSet(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	a, b := openBackend(t, name, lookerParams), openBackend(t, name, lookerParams)
	defer a.AddWakeQueues([]string{"qa"})()
	defer b.AddWakeQueues([]string{"qb"})()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakesA, wakesA2, wakesB := listenWakes(t, ctx, a), listenWakes(t, ctx, a), listenWakes(t, ctx, b)
	for range 3 {
		lookerInsert(t, inserter, "qa")
		lookerInsert(t, inserter, "qb")
		awaitWake(t, wakesA, "qa", "a's first listener")
		awaitWake(t, wakesA2, "qa", "a's second listener")
		awaitWake(t, wakesB, "qb", "b's listener")
	}
}

// TestLookerCursorOfOwnBackend: when the lease is held by the listener's
// own backend (another Listen of it, for another client), its cursor says
// nothing of what this Listen has read: a job at or below that cursor
// still wakes this Listen's client. The lease is written as another
// Listen of the backend would leave it, holding on for an hour with its
// cursor past the next job's id, before the job is inserted.
func TestLookerCursorOfOwnBackend(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	a := openBackend(t, name, lookerParams)
	defer a.AddWakeQueues([]string{"qa"})()
	db := "`" + a.Database() + "`"
	if _, err := a.DB().Exec("INSERT INTO "+db+".spool_looker (set_key, holder, until, cursor_id, slow) "+
		"VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, (SELECT coalesce(max(id), 0) + 1000 FROM "+db+".spool_jobs), 0)",
		a.WakeQueuesKey(), a.LookerName()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := listenWakes(t, ctx, a)
	lookerInsert(t, inserter, "qa")
	awaitWake(t, wakes, "qa", "the listener whose backend holds the lease")
}

// lookerParams open a backend with the looker by name: the looker's tests
// hold whatever the default is.
var lookerParams = url.Values{mysql.WakeRoutingParam: {mysql.WakeRoutingLooker}}

// awaitIdleLease waits until the looker's lease of be's set of queues is
// held by be for longer than a lease taken while jobs come
// (lookerLease, 100 ms): the renewal of an idle holder, which keeps the
// lease as the fleet's one idle looker.
func awaitIdleLease(t *testing.T, be *mysql.Backend) {
	t.Helper()
	db := "`" + be.Database() + "`"
	deadline := time.Now().Add(15 * time.Second)
	for {
		var held bool
		if err := be.DB().QueryRow("SELECT count(*) > 0 FROM "+db+".spool_looker WHERE set_key = ? AND holder = ? "+
			"AND until > UTC_TIMESTAMP(6) + INTERVAL 1 SECOND", be.WakeQueuesKey(), be.LookerName()).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle holder holds no idle lease after 15 s (it gave the lease up, or renews it as while jobs come)")
		}
		time.Sleep(20 * time.Millisecond) // the state is polled: the server's clock decides it
	}
}

// TestLookerIdleHolderKeepsLease: a holder that sees no new job for a
// while keeps the lease, renewed for longer, instead of giving it up; a
// job inserted then wakes it, and when it stops, the lease passes to
// another listener, which hears the next job.
func TestLookerIdleHolderKeepsLease(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	a, b := openBackend(t, name, lookerParams), openBackend(t, name, lookerParams)
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	wakesA := listenWakes(t, ctxA, a)
	lookerInsert(t, inserter, "first")
	awaitWake(t, wakesA, "first", "the first listener")
	awaitIdleLease(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakesB := listenWakes(t, ctx, b)
	lookerInsert(t, inserter, "after_idle")
	awaitWake(t, wakesA, "after_idle", "the idle holder")
	stopA() // it gives the lease up
	lookerInsert(t, inserter, "after_stop")
	awaitWake(t, wakesB, "after_stop", "the listener after the holder stopped")
}

// TestLookerIdleWatchersBackOff: while the lease's holder is idle and no
// job comes, another listener looks less and less often, at most every
// lookerIdleWatch (500 ms), where an idle listener looked every
// idleJobsInterval (100 ms) before: an idle fleet costs the server about
// one process's looks.
func TestLookerIdleWatchersBackOff(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	a, b := openBackend(t, name, lookerParams), openBackend(t, name, lookerParams)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakesA := listenWakes(t, ctx, a)
	lookerInsert(t, inserter, "first")
	awaitWake(t, wakesA, "first", "the holder")
	awaitIdleLease(t, a)
	_ = listenWakes(t, ctx, b)
	// Past the watcher's first looks (50, 100, 200, 400 ms apart).
	for deadline := time.Now().Add(15 * time.Second); b.HeadsReads() < 6; {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher read the heads %d times in 15 s", b.HeadsReads())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Over a window of 3 s: about 6 looks at 500 ms; 30 at 100 ms. A
	// loaded machine makes looks later, never more.
	const window = 3 * time.Second
	n0 := b.HeadsReads()
	time.Sleep(window)
	if n := b.HeadsReads() - n0; n > 10 {
		t.Fatalf("the watcher of an idle holder read the heads %d times in %v, want at most 10", n, window)
	}
}

// TestLookerWatchersOfHolderWithIdleWorkers: while jobs come and the
// looker's holder has an idle worker, another listener cannot take the
// lease before it lapses, and reads the heads every lookerBusyWatch
// (200 ms, the interval at which the heads carry cancellations while
// jobs come), not every lookerWatch (50 ms): with 7 such listeners those
// reads were the part of the server's statements that grew with the
// processes.
func TestLookerWatchersOfHolderWithIdleWorkers(t *testing.T) {
	t.Parallel()
	name, inserter := lookerSetup(t)
	a, b := openBackend(t, name, lookerParams), openBackend(t, name, lookerParams)
	defer a.AddWakeDemand(func() bool { return true })()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakesA := listenWakes(t, ctx, a)
	lookerInsert(t, inserter, "first")
	awaitWake(t, wakesA, "first", "the holder")
	_ = listenWakes(t, ctx, b)
	// Jobs come, one every 20 ms, until the end of the test.
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := inserter.Insert(ctx, noteArgs{}, &spool.InsertOpts{Queue: "busy"}); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	awaitWake(t, wakesA, "busy", "the holder, as jobs come")
	time.Sleep(500 * time.Millisecond) // past the watcher's first looks
	// Over a window of 3 s: about 15 looks at 200 ms, 60 at 50 ms. A
	// loaded machine makes looks later, never more.
	const window = 3 * time.Second
	n0 := b.HeadsReads()
	time.Sleep(window)
	if n := b.HeadsReads() - n0; n > 24 {
		t.Fatalf("the watcher of a holder with idle workers read the heads %d times in %v while jobs came, want at most 24", n, window)
	}
	if a.HeadsReads() == 0 {
		t.Fatal("the holder never looked")
	}
}
