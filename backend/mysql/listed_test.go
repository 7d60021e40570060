package mysql_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestClaimOfListedJobs: a small claim sent after Listen listed a queue's
// new jobs takes those by id, within the bound after the queue's last
// head claim, and not a pending job no list names (one released back to
// the queue); once the bound has passed, the backend wakes the queue, and
// the claim that follows walks the head and takes that job.
func TestClaimOfListedJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	var (
		mu     sync.Mutex
		now    = time.Now()
		rechk  []func()
		waited []time.Duration
	)
	be.SetListedClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}, func(d time.Duration, f func()) {
		mu.Lock()
		defer mu.Unlock()
		rechk, waited = append(rechk, f), append(waited, d)
	})
	claim := func() []*backend.JobRow {
		t.Helper()
		jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	insert := func(tx backend.Tx) int64 { return insertListedJob(t, ctx, be, tx) }
	wakes := listenWakes(t, ctx, be)
	if jobs := claim(); len(jobs) != 0 {
		t.Fatalf("head claim of the empty queue: %d jobs, want none", len(jobs))
	}

	// unlisted is a job no list names: listed and claimed once, then
	// released back to the queue.
	unlisted := insert(nil)
	awaitWake(t, wakes, "q", "Listen reading the job to release")
	if jobs := claim(); len(jobs) != 1 || jobs[0].ID != unlisted {
		t.Fatalf("claim of the listed job took %v, want job %d", ids(jobs), unlisted)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "c"}); err != nil || n != 1 {
		t.Fatalf("release of the claim: %d jobs (%v), want 1", n, err)
	}
	listed := insert(nil)
	awaitWake(t, wakes, "q", "Listen reading the listed job")
	if jobs := claim(); len(jobs) != 1 || jobs[0].ID != listed {
		t.Fatalf("claim after the listed job's wake-up took %v, want only job %d (listed; %d is not)", ids(jobs), listed, unlisted)
	}
	if n := be.ClaimsListed(); n != 2 {
		t.Fatalf("%d claims of listed jobs, want 2", n)
	}

	// The bound: the recheck armed by the listed claim wakes the queue
	// once the last head claim is listedHeadEvery old, not before.
	mu.Lock()
	if len(rechk) != 1 {
		mu.Unlock()
		t.Fatalf("%d rechecks armed, want 1", len(rechk))
	}
	f, d := rechk[0], waited[0]
	mu.Unlock()
	f() // early: the clock has not moved
	mu.Lock()
	if len(rechk) != 2 || waited[1] != d {
		mu.Unlock()
		t.Fatalf("an early recheck armed %d (waits %v), want it armed again for %v", len(rechk)-1, waited, d)
	}
	now = now.Add(d)
	f = rechk[1]
	mu.Unlock()
	for len(wakes) > 0 {
		<-wakes
	}
	f()
	awaitWake(t, wakes, "q", "the recheck once the bound passed")
	if jobs := claim(); len(jobs) != 1 || jobs[0].ID != unlisted {
		t.Fatalf("claim after the recheck took %v, want job %d (unlisted)", ids(jobs), unlisted)
	}
	if n := be.ClaimsListed(); n != 2 {
		t.Fatalf("%d claims of listed jobs, want 2: the claim after the bound walks the head", n)
	}
}

// TestListenReadsTheJobsThatCommitLate: a job whose insert took its id
// before a job Listen read, and committed after that read, is read by
// one of Listen's next reads (its gaps), woken and listed: a claim of
// listed jobs takes it by id, and it does not wait for a head claim.
func TestListenReadsTheJobsThatCommitLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	// The listed claims' clock stands still: the last claim below must
	// find the queue's head claim within the bound however slow the
	// machine, so that only Listen's reads decide whether it takes the
	// late job by id.
	now := time.Now()
	be.SetListedClock(func() time.Time { return now }, func(time.Duration, func()) {})
	insert := func(tx backend.Tx) int64 { return insertListedJob(t, ctx, be, tx) }
	wakes := listenWakes(t, ctx, be)
	if jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"}); err != nil || len(jobs) != 0 {
		t.Fatalf("head claim of the empty queue: %d jobs (%v), want none", len(jobs), err)
	}
	tx, err := be.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	late := insert(tx)
	first := insert(nil)
	if first < late {
		t.Fatalf("ids %d (committed first) below %d (committed late): the test needs them the other way", first, late)
	}
	awaitWake(t, wakes, "q", "Listen reading the job committed first")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wakes, "q", "Listen reading the job committed late")
	jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != late && jobs[1].ID != late {
		t.Fatalf("claim took %v, want jobs %d and %d", ids(jobs), late, first)
	}
	if n := be.ClaimsListed(); n != 1 {
		t.Fatalf("%d claims of listed jobs, want 1: both jobs listed", n)
	}
}

// insertListedJob inserts one job into queue "q" in tx (nil: a
// transaction of its own) and returns its id.
func insertListedJob(t *testing.T, ctx context.Context, be backend.Backend, tx backend.Tx) int64 {
	t.Helper()
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: []*backend.JobInsertParams{
		{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs[0]
}

func ids(jobs []*backend.JobRow) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
