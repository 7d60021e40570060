package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// waitFor polls cond (a state of the server or the backend, not a time)
// until it holds, for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockRow opens a transaction on db that holds the row lock of job id in
// database.
func lockRow(t *testing.T, db *sql.DB, database string, id int64) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var got int64
	if err := tx.QueryRow("SELECT id FROM `"+database+"`.spool_jobs WHERE id = ? FOR UPDATE", id).Scan(&got); err != nil {
		t.Fatalf("lock job %d: %v", id, err)
	}
	return tx
}

// TestLockWaitTimeoutRetriedInside holds the row lock of a job whose
// handler has returned, so the client's completion times out waiting for it
// (1205) again and again. The backend retries and counts each timeout; the
// client sees no error (nothing logged at warning level); once the lock goes
// the completion is written once and the job never runs again.
func TestLockWaitTimeoutRetriedInside(t *testing.T) {
	t.Parallel()
	db := testdb.NewMySQLDatabase(t)
	be := openBackend(t, db, url.Values{"innodb_lock_wait_timeout": {"1"}})
	ctx := context.Background()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var logs conformance.LogBuffer
	var runs atomic.Int32
	started := make(chan int64, 1)
	proceed := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		runs.Add(1)
		started <- j.ID
		<-proceed
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, conformance.NoteArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	release := sync.OnceFunc(func() { close(proceed) })
	defer release() // before Stop, which waits for the handler
	if id := <-started; id != res.ID {
		t.Fatalf("started %d", id)
	}
	blocker := lockRow(t, testdb.MySQLAdmin(t), be.Database(), res.ID)
	release()
	waitFor(t, "two lock wait timeouts retried", func() bool { return be.Metrics().LockWaitTimeouts >= 2 })
	if j, err := be.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRunning {
		t.Fatalf("job while its completion waits: %+v %v", j, err)
	}
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the completion", func() bool {
		j, err := be.JobGet(ctx, res.ID)
		return err == nil && j.State == backend.StateCompleted
	})
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
	if j, _ := be.JobGet(ctx, res.ID); j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("completed job: %+v", j)
	}
	if out := logs.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("the lock conflict reached the client:\n%s", out)
	}
	if m := be.Metrics(); m.RetriesExhausted != 0 || m.Deadlocks != 0 {
		t.Fatalf("metrics: %+v", m)
	}
}

// TestCleanupTakesNoLockOfRowsItKeeps holds the row lock of a running job,
// then of a job finished just now, while the leader's cleanup runs. The
// cleanup deletes the finished job past its retention and waits for
// neither: it finds the rows due by a plain read and deletes them by
// primary key, so it locks no index entry of a row it keeps. A locking scan
// of spool_jobs_finalized read one entry past its range (the next finish,
// or a running job's, whose finalized_at holds a sentinel after every time)
// and locked it before its row; a finish or retry of that row, holding the
// row's lock and needing the entry, closed a deadlock
// (TestLockWaitTimeoutRetriedInside met it when the cleanup ran during its
// lock waits).
func TestCleanupTakesNoLockOfRowsItKeeps(t *testing.T) {
	t.Parallel()
	be := newBackend(t, url.Values{"innodb_lock_wait_timeout": {"1"}})
	ctx := context.Background()
	ids, leases := claimKinds(ctx, t, be, "old", "running", "recent")
	old, running, recent := ids[0], ids[1], ids[2]
	complete := func(id int64) {
		t.Helper()
		fr, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: leases[id], Outcome: backend.OutcomeComplete}}})
		if err != nil || len(fr.Rejected) != 0 {
			t.Fatalf("complete job %d: %+v %v", id, fr, err)
		}
	}
	complete(old)
	admin := testdb.MySQLAdmin(t)
	if _, err := admin.ExecContext(ctx, "UPDATE `"+be.Database()+"`.spool_jobs SET finalized_at = finalized_at - INTERVAL 2 HOUR WHERE id = ?", old); err != nil {
		t.Fatal(err)
	}
	cleanup := func(want int) {
		t.Helper()
		n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Hour})
		if err != nil || n != want {
			t.Fatalf("cleanup: %d %v; want %d deleted", n, err, want)
		}
		if m := be.Metrics(); m.LockWaitTimeouts != 0 || m.Deadlocks != 0 {
			t.Fatalf("cleanup waited for a row it keeps: %+v", m)
		}
	}
	// The running job's entry (the sentinel) is the first past the range.
	runningLock := lockRow(t, admin, be.Database(), running)
	cleanup(1)
	if _, err := be.JobGet(ctx, old); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job past its retention: %v; want it deleted", err)
	}
	// Now a job finished just now is the first past the range.
	complete(recent)
	recentLock := lockRow(t, admin, be.Database(), recent)
	cleanup(0)
	if err := errors.Join(runningLock.Commit(), recentLock.Commit()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]backend.State{running: backend.StateRunning, recent: backend.StateCompleted} {
		if j, err := be.JobGet(ctx, id); err != nil || j.State != want {
			t.Fatalf("job %d after the cleanup: %+v %v; want %s", id, j, err, want)
		}
	}
}

// TestDeadlockRetriedInside builds a real deadlock: another transaction,
// heavier (it has written many rows, so InnoDB picks the backend's as the
// victim), holds job B's lock while the backend's finish of jobs A and B holds
// A's and waits for B; the other transaction then asks for A. The finish is
// rolled back by InnoDB, retried inside the backend, counted, and once the
// other transaction ends it writes both completions, once.
func TestDeadlockRetriedInside(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	conformance.InsertNotes(t, c, 0, 2)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 2, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %v %v", rowIDs(rows), err)
	}
	a, b := rows[0], rows[1]
	admin := testdb.MySQLAdmin(t)
	if _, err := admin.ExecContext(ctx, "CREATE TABLE `"+be.Database()+"`.ballast (n INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	other, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	var ballast strings.Builder
	ballast.WriteString("INSERT INTO `" + be.Database() + "`.ballast VALUES (0)")
	for i := 1; i < 2000; i++ {
		fmt.Fprintf(&ballast, ",(%d)", i)
	}
	if _, err := other.ExecContext(ctx, ballast.String()); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := other.QueryRowContext(ctx, "SELECT id FROM `"+be.Database()+"`.spool_jobs WHERE id = ? FOR UPDATE", b.ID).Scan(&got); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *backend.JobFinishManyResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
			{Lease: a.Lease(), Outcome: backend.OutcomeComplete}, {Lease: b.Lease(), Outcome: backend.OutcomeComplete},
		}})
		done <- result{res, err}
	}()
	// The finish locks A, then waits for B. A probe that finds A locked
	// (NOWAIT) knows the finish holds it: nobody else touches A.
	waitFor(t, "the finish to hold A's lock", func() bool {
		probe, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Rollback()
		err = probe.QueryRowContext(ctx, "SELECT id FROM `"+be.Database()+"`.spool_jobs WHERE id = ? FOR UPDATE NOWAIT", a.ID).Scan(&got)
		var me *drv.MySQLError
		switch {
		case err == nil:
			return false
		case errors.As(err, &me) && (me.Number == 1205 || me.Number == 3572): // lock held (MariaDB, MySQL)
			return true
		}
		t.Fatalf("probe A's lock: %v", err)
		return false
	})
	// Closing the cycle: InnoDB rolls back the lighter transaction at once.
	if err := other.QueryRowContext(ctx, "SELECT id FROM `"+be.Database()+"`.spool_jobs WHERE id = ? FOR UPDATE", a.ID).Scan(&got); err != nil {
		t.Fatalf("the heavier transaction was the victim (%v); the test needs the backend's to be", err)
	}
	waitFor(t, "the deadlock to be counted", func() bool { return be.Metrics().Deadlocks >= 1 })
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.res.Rejected) != 0 {
		t.Fatalf("finish after a deadlock: %+v %v", r.res, r.err)
	}
	finished := map[int64]time.Time{}
	for _, j := range rows {
		row, err := be.JobGet(ctx, j.ID)
		if err != nil || row.State != backend.StateCompleted || row.Attempt != 1 || row.Fence != j.Fence || row.FinalizedAt == nil {
			t.Fatalf("job %d after the retried finish: %+v %v", j.ID, row, err)
		}
		finished[j.ID] = *row.FinalizedAt
	}
	// The same completion again (a retry of a write whose reply was lost)
	// finds the job completed under its lease and writes nothing: nothing
	// completes twice, and no completed job is claimed.
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: a.Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("second completion: %+v %v", res, err)
	}
	if row, err := be.JobGet(ctx, a.ID); err != nil || row.State != backend.StateCompleted || row.FinalizedAt == nil || !row.FinalizedAt.Equal(finished[a.ID]) {
		t.Fatalf("job %d after its second completion: %+v %v (finalized at %v before)", a.ID, row, err, finished[a.ID])
	}
	if again, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 2, Lease: time.Minute, ClaimID: "t2"}); err != nil || len(again) != 0 {
		t.Fatalf("completed jobs claimed again: %v %v", rowIDs(again), err)
	}
	if m := be.Metrics(); m.RetriesExhausted != 0 {
		t.Fatalf("metrics: %+v", m)
	}
	// What a caller's transaction gets back, it can recognise.
	wrapped := fmt.Errorf("insert job: %w", &drv.MySQLError{Number: 1213, Message: "Deadlock found"})
	if !mysql.IsLockConflict(wrapped) || !mysql.IsLockConflict(&drv.MySQLError{Number: 1205}) ||
		mysql.IsLockConflict(&drv.MySQLError{Number: 1062}) || mysql.IsLockConflict(errors.New("x")) {
		t.Fatal("IsLockConflict misreads errors")
	}
}
