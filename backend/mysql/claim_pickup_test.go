package mysql_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// freezeListedClock stops the clock of be's claims of listed jobs, so
// that a claim finds the queue's head claim within the bound however
// slow the machine: only the lists decide which kind of claim it sends.
func freezeListedClock(be *mysql.Backend) {
	now := time.Now()
	be.SetListedClock(func() time.Time { return now }, func(time.Duration, func()) {})
}

// sessionCounters reads the session's statements by kind (BEGIN and
// COMMIT) and its connection id, on a backend whose pool holds one
// connection.
func sessionCounters(t *testing.T, ctx context.Context, be *mysql.Backend) (conn, begins, commits int64) {
	t.Helper()
	if err := be.DB().QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
		t.Fatal(err)
	}
	rows, err := be.DB().QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Com_begin', 'Com_commit')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			v    int64
		)
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		switch name {
		case "Com_begin":
			begins = v
		case "Com_commit":
			commits = v
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return conn, begins, commits
}

// listedBackend returns a backend (newBackend with params) whose listed
// claims' clock stands still, the queues its Listen wakes, and a head
// claim of the empty queue "q" just made, so that the queue's next claims
// may take the jobs Listen lists.
func listedBackend(t *testing.T, ctx context.Context, params url.Values) (*mysql.Backend, <-chan string) {
	t.Helper()
	be := newBackend(t, params)
	freezeListedClock(be)
	wakes := listenWakes(t, ctx, be)
	if jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c0"}); err != nil || len(jobs) != 0 {
		t.Fatalf("head claim of the empty queue: %d jobs (%v), want none", len(jobs), err)
	}
	return be, wakes
}

// insertListed inserts n jobs into queue "q" of be and waits until its
// Listen has listed them, returning their ids in insert order.
func insertListed(t *testing.T, ctx context.Context, be *mysql.Backend, wakes <-chan string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = insertListedJob(t, ctx, be, nil)
	}
	for be.ListedCount("q") < n {
		awaitWake(t, wakes, "q", "Listen reading the jobs")
	}
	return ids
}

// TestClaimOfListedJobsOpensNoTransaction: on MariaDB a claim of the jobs
// Listen listed is a read by primary key and one autocommit UPDATE,
// without BEGIN and COMMIT of its own: two round trips where the
// transaction took four. The backend's pool holds one connection, whose
// session counts the statements.
func TestClaimOfListedJobsOpensNoTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, wakes := listedBackend(t, ctx, url.Values{mysql.MaxConnsParam: {"1"}})
	listed := insertListed(t, ctx, be, wakes, 2)
	first, second := listed[0], listed[1]
	conn0, begins0, commits0 := sessionCounters(t, ctx, be)
	jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	conn1, begins1, commits1 := sessionCounters(t, ctx, be)
	if conn1 != conn0 {
		t.Fatalf("the pool's connection changed (%d, then %d): the test needs one session", conn0, conn1)
	}
	if len(jobs) != 2 || jobs[0].ID != first || jobs[1].ID != second {
		t.Fatalf("claim of the listed jobs took %v, want %d and %d", ids(jobs), first, second)
	}
	for _, j := range jobs {
		if j.State != backend.StateRunning || j.Attempt != 1 || j.LeasedBy != "c" || j.AttemptedAt == nil || j.LeasedUntil == nil ||
			!j.LeasedUntil.After(*j.AttemptedAt) {
			t.Fatalf("claimed job %d as returned: state %s, attempt %d, leased by %q, attempted at %v, leased until %v",
				j.ID, j.State, j.Attempt, j.LeasedBy, j.AttemptedAt, j.LeasedUntil)
		}
	}
	if n := be.ClaimsListed(); n != 1 {
		t.Fatalf("%d claims of listed jobs, want 1", n)
	}
	want := int64(0)
	if !be.IsMariaDB() {
		want = 1 // MySQL has no NOWAIT statement setting: the transaction
	}
	if begins1-begins0 != want || commits1-commits0 != want {
		t.Fatalf("the claim of listed jobs sent %d BEGIN and %d COMMIT, want %d of each", begins1-begins0, commits1-commits0, want)
	}
	// The claim is durable as returned: another read sees it.
	var running int
	if err := be.DB().QueryRowContext(ctx, "SELECT count(*) FROM `"+be.Database()+"`.spool_jobs WHERE state = 'running' AND leased_by = 'c'").Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 2 {
		t.Fatalf("%d jobs running under the claim, want 2", running)
	}
}

// TestClaimOfListedJobsSkipsRowsOthersHold: a claim of listed jobs does
// not wait for a row another transaction holds (a caller's transaction
// that changes a pending job): it takes the other listed jobs at once.
// On MariaDB the UPDATE without a transaction meets the lock and is
// rolled back at once, and the claim takes the jobs in a transaction
// that skips the locked row.
func TestClaimOfListedJobsSkipsRowsOthersHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, wakes := listedBackend(t, ctx, nil)
	listed := insertListed(t, ctx, be, wakes, 2)
	held, free := listed[0], listed[1]
	tx, err := be.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM `"+be.Database()+"`.spool_jobs WHERE id = ? FOR UPDATE", held).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// InnoDB's lock wait timeout (50 s by default) is what a claim that
	// waited would meet first.
	claimCtx, cancelClaim := context.WithTimeout(ctx, 20*time.Second)
	defer cancelClaim()
	jobs, err := be.JobClaim(claimCtx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c2"})
	if err != nil {
		t.Fatalf("claim with a listed row held by another transaction: %v", err)
	}
	if len(jobs) != 1 || jobs[0].ID != free {
		t.Fatalf("claim took %v, want only job %d (job %d is held)", ids(jobs), free, held)
	}
	if want := map[bool]int64{true: 1, false: 0}[be.IsMariaDB()]; be.ClaimsListedLocked() != want {
		t.Fatalf("%d claims of listed jobs fell back to a transaction, want %d", be.ClaimsListedLocked(), want)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// claimWithTurnHeld sends a claim of up to max jobs of queue q while
// the queue's turn is held, as by a head claim of the process out, and
// returns whether it began to wait for the turn and, once it has
// returned, its jobs; then gives the turn back. beforeRelease runs while
// the claim waits, when it does.
func claimWithTurnHeld(t *testing.T, ctx context.Context, be *mysql.Backend, claimID string, max int, beforeRelease func()) (waited bool, jobs []*backend.JobRow) {
	t.Helper()
	waiting := make(chan struct{})
	release, err := be.HoldClaimTurn(ctx, "q", func() { close(waiting) })
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		jobs []*backend.JobRow
		err  error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: max, Lease: time.Minute, ClaimID: claimID})
		done <- result{jobs, err}
	}()
	var r result
	select {
	case <-waiting:
		waited = true
		if beforeRelease != nil {
			beforeRelease()
		}
		release()
		select {
		case r = <-done:
		case <-ctx.Done():
			t.Fatal("the claim did not return after its turn came")
		}
	case r = <-done:
		release()
	case <-ctx.Done():
		t.Fatal("the claim neither waited for its turn nor returned")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return waited, r.jobs
}

// releasedJob inserts a job no list names: listed and claimed once, then
// released back to the queue. Only a head claim takes it.
func releasedJob(t *testing.T, ctx context.Context, be *mysql.Backend, wakes <-chan string) int64 {
	t.Helper()
	id := insertListedJob(t, ctx, be, nil)
	awaitWake(t, wakes, "q", "Listen reading the job to release")
	if jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "r"}); err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claim of the listed job took %v (%v), want job %d", ids(jobs), err, id)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "r"}); err != nil || n != 1 {
		t.Fatalf("release of the claim: %d jobs (%v), want 1", n, err)
	}
	return id
}

// TestClaimOfListedJobsTakesNoTurn: a claim of listed jobs does not wait
// for the queue's turn while another claim of its process holds it (a
// head claim, whose walk over the claim index's unpurged entries took up
// to 55 ms after a drain): it takes the listed jobs by id at once.
func TestClaimOfListedJobsTakesNoTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, wakes := listedBackend(t, ctx, nil)
	unlisted := releasedJob(t, ctx, be, wakes)
	listed := insertListed(t, ctx, be, wakes, 1)[0]
	waited, jobs := claimWithTurnHeld(t, ctx, be, "c1", 10, nil)
	if waited {
		t.Fatal("the claim of a listed job waited for the turn of the claim out")
	}
	if len(jobs) != 1 || jobs[0].ID != listed {
		t.Fatalf("claim took %v, want only job %d (listed; %d is not)", ids(jobs), listed, unlisted)
	}
}

// TestClaimThatWaitedForItsTurnTakesListedJobs: a small claim sent with
// no job listed waits for the queue's turn while another claim of its
// process is out, and then takes the jobs Listen listed meanwhile by id
// like any other, not by walking the head: it leaves a pending job no
// list names (one released back to the queue) to a head claim.
func TestClaimThatWaitedForItsTurnTakesListedJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, wakes := listedBackend(t, ctx, nil)
	unlisted := releasedJob(t, ctx, be, wakes)
	var listed int64
	waited, jobs := claimWithTurnHeld(t, ctx, be, "c1", 10, func() {
		listed = insertListed(t, ctx, be, wakes, 1)[0]
	})
	if !waited {
		t.Fatal("the claim sent with no job listed did not wait for the turn of the claim out")
	}
	if len(jobs) != 1 || jobs[0].ID != listed {
		t.Fatalf("claim that waited for its turn took %v, want only job %d (listed; %d is not)", ids(jobs), listed, unlisted)
	}
	if n := be.ClaimsListed(); n != 2 {
		t.Fatalf("%d claims of listed jobs, want 2", n)
	}
}

// TestClaimOfListedJobsAskingForFewer: a claim that asks for fewer jobs
// than are listed takes the oldest of them by id, and the next claim the
// rest, rather than walking the head: at 1,000 jobs a second a claim
// sent while another is out asks for 16, and after a stall more were
// listed than that.
func TestClaimOfListedJobsAskingForFewer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be, wakes := listedBackend(t, ctx, nil)
	unlisted := releasedJob(t, ctx, be, wakes)
	listed := insertListed(t, ctx, be, wakes, 3)
	jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 2, Lease: time.Minute, ClaimID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != listed[0] || jobs[1].ID != listed[1] {
		t.Fatalf("claim of 2 with 3 jobs listed took %v, want %v (the oldest listed; %d is not listed)", ids(jobs), listed[:2], unlisted)
	}
	if jobs, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c2"}); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != listed[2] {
		t.Fatalf("the next claim took %v, want only job %d (the rest of the list)", ids(jobs), listed[2])
	}
	if n := be.ClaimsListed(); n != 3 {
		t.Fatalf("%d claims of listed jobs, want 3", n)
	}
}
