package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// killGuard bounds the waits of the cancel tests: past it they fail
// instead of hanging.
const killGuard = time.Minute

// oneJob is a one-job insert on queue.
func oneJob(queue string) *backend.JobInsertManyParams {
	return &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{Queue: queue, Kind: "k", Args: []byte(`{}`), MaxAttempts: 3}}}
}

// countCancelJobs counts the jobs of queue.
func countCancelJobs(t *testing.T, be *mysql.Backend, queue string) int {
	t.Helper()
	var n int
	q := fmt.Sprintf("SELECT COUNT(*) FROM `%s`.spool_jobs WHERE queue = ?", be.Database())
	if err := be.DB().QueryRowContext(context.Background(), q, queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitForWaiters waits until n sessions wait for lock, failing past the
// guard.
func waitForWaiters(t *testing.T, be *mysql.Backend, n int) {
	t.Helper()
	guard := time.Now().Add(killGuard)
	for {
		var got int
		err := be.DB().QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND STATE LIKE 'Waiting for table%'", be.Database()).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(guard) {
			t.Fatalf("%d of %d sessions wait for the lock after %s", got, n, killGuard)
		}
		time.Sleep(5 * time.Millisecond) // a look at the server's sessions, not a synchronisation
	}
}

// waitForNoStatement waits until no other session of the database runs a
// statement on the jobs table: a statement the server still runs after its
// call returned (as go-sql-driver/mysql's cancel leaves it) has then ended
// and committed or not.
func waitForNoStatement(t *testing.T, be *mysql.Backend) {
	t.Helper()
	guard := time.Now().Add(killGuard)
	for {
		var n int
		err := be.DB().QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND IN ('Query', 'Execute') AND INFO LIKE '%spool_jobs%'",
			be.Database()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(guard) {
			t.Fatalf("%d statements on the jobs table still run %s after the lock was released", n, killGuard)
		}
		time.Sleep(5 * time.Millisecond) // a look at the server's sessions, not a synchronisation
	}
}

// TestCancelledInsertIsKilled: a one-job insert (an autocommit INSERT)
// whose context is cancelled while it waits behind LOCK TABLES returns
// while the lock is held, and its statement is killed on the server before
// it returns: nothing commits once the lock is released, and the error
// says so (backend.ErrNotWritten, matching context.Canceled).
// go-sql-driver/mysql only closes the connection on cancel, so against
// main the server ran the insert when the lock was freed, and the error
// said "outcome unknown".
func TestCancelledInsertIsKilled(t *testing.T) {
	ctx := context.Background()
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, nil)
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Another pool looks at the server: be's may all wait behind the lock.
	look := openBackend(t, name, nil)
	lock := lockStore(t, be)
	locked := true
	defer func() {
		if locked {
			lock.Unlock()
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := be.JobInsertMany(cctx, oneJob("cancel"))
		done <- err
	}()
	waitForWaiters(t, look, 1)
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(killGuard):
		t.Fatalf("the insert did not return within %s of its cancellation while the lock was held", killGuard)
	}
	lock.Unlock()
	locked = false
	waitForNoStatement(t, look)
	kills, fallbacks := mysql.KillCounts(be)
	if n := countCancelJobs(t, look, "cancel"); n != 0 {
		t.Fatalf("the cancelled insert committed after the lock was released (%d job(s)); its error: %v (kills %d, fallbacks %d)", n, err, kills, fallbacks)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, backend.ErrNotWritten) {
		t.Fatalf("cancelled insert: %v, want backend.ErrNotWritten matching context.Canceled (kills %d, fallbacks %d)", err, kills, fallbacks)
	}
	// The session whose statement was killed goes on serving the pool.
	if _, err := be.JobInsertMany(ctx, oneJob("cancel")); err != nil {
		t.Fatal(err)
	}
	if n := countCancelJobs(t, look, "cancel"); n != 1 {
		t.Fatalf("%d jobs after an insert, want 1", n)
	}
}

// TestManyCancelsBehindALock: many writes of both kinds (the autocommit
// insert, and the transaction of a batch) cancelled behind a lock, more
// than the pool has connections, all return while the lock is held (the
// kills go over connections of their own, not the pool's, all of whose
// connections wait behind the lock), and the pool serves the next call.
// Each call inserts into a queue of its own: a call whose error says it
// was not written has no job committed once the lock is released. Every
// statement that reached the server is killed, unless its kill fell back
// to closing the connection (a slow machine), when its error says the
// outcome is unknown. Against main 4 jobs of calls cancelled so committed
// after the lock was released.
func TestManyCancelsBehindALock(t *testing.T) {
	ctx := context.Background()
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, nil)
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	look := openBackend(t, name, nil)
	lock := lockStore(t, be)
	locked := true
	defer func() {
		if locked {
			lock.Unlock()
		}
	}()
	const calls = 3 * testdb.PoolMaxConns
	cctx, cancel := context.WithCancel(ctx)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := oneJob(fmt.Sprintf("cancel%d", i))
			if i%2 == 1 {
				// 1,001 jobs, two statements: the backend's own
				// transaction.
				for range 1000 {
					p.Jobs = append(p.Jobs, p.Jobs[0])
				}
			}
			_, errs[i] = be.JobInsertMany(cctx, p)
		}()
	}
	// Every connection of the pool but the lock's waits behind it.
	waitForWaiters(t, look, testdb.PoolMaxConns-1)
	cancel()
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()
	select {
	case <-all:
	case <-time.After(killGuard):
		t.Fatalf("the cancelled inserts did not all return within %s while the lock was held", killGuard)
	}
	lock.Unlock()
	locked = false
	waitForNoStatement(t, look)
	kills, fallbacks := mysql.KillCounts(be)
	// A call cancelled while it waited for one of the pool's connections
	// sent nothing, but database/sql's error does not say so: its fate is
	// reported unknown.
	notWritten := 0
	for i, err := range errs {
		n := countCancelJobs(t, look, fmt.Sprintf("cancel%d", i))
		switch {
		case !errors.Is(err, context.Canceled):
			t.Errorf("cancelled insert %d: %v, want it to match context.Canceled", i, err)
		case errors.Is(err, backend.ErrNotWritten):
			notWritten++
			if n != 0 {
				t.Errorf("cancelled insert %d said %v, and %d job(s) of it committed after the lock was released", i, err, n)
			}
		case !errors.Is(err, backend.ErrOutcomeUnknown):
			t.Errorf("cancelled insert %d: %v, want backend.ErrNotWritten or backend.ErrOutcomeUnknown", i, err)
		}
	}
	t.Logf("%d of %d cancelled calls not written; kills %d, fallbacks %d", notWritten, calls, kills, fallbacks)
	if fallbacks == 0 && notWritten < testdb.PoolMaxConns-1 {
		t.Errorf("%d cancelled insert(s) not written with no kill fallen back, want at least the %d whose statements waited behind the lock", notWritten, testdb.PoolMaxConns-1)
	}
	if _, err := be.JobInsertMany(ctx, oneJob("after")); err != nil {
		t.Fatal(err)
	}
	if n := countCancelJobs(t, look, "after"); n != 1 {
		t.Fatalf("%d jobs after an insert, want 1", n)
	}
}
