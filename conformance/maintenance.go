package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testRescue(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan *spool.Job[NoteArgs], 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- j
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	id := insert(t, c, NoteArgs{}, nil)
	// A "worker" claims the job and dies: no heartbeat, no completion.
	if rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: 200 * time.Millisecond, ClaimID: "dead-worker"}); err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v", err)
	}
	start(t, c)
	j := recv(t, ran, "rescued job to run")
	if j.ID != id || j.Attempt != 2 || len(j.Errors) != 1 || !contains(j.Errors[0].Error, "lease expired") || !contains(j.Errors[0].Error, "dead-worker") {
		t.Fatalf("rescued run: attempt %d errors %+v", j.Attempt, j.Errors)
	}
	waitState(t, be, id, backend.StateCompleted)
}

// testRescueKeepsPlace: a rescued job goes back where it was in the queue,
// ahead of jobs inserted while it was leased, so that recovery behind a
// backlog takes about a lease and a rescue, not the backlog's drain time.
// The place is the job's run time (its order key within a priority); the
// claim that follows takes the whole queue, since some strategies pick at
// random within a window, and must include the rescued job.
func testRescueKeepsPlace(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	first := insert(t, c, NoteArgs{N: 0}, nil)
	before, err := be.JobGet(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: 50 * time.Millisecond, ClaimID: "dead-worker"}); err != nil || len(rows) != 1 || rows[0].ID != first {
		t.Fatalf("claim: %v (%d rows)", err, len(rows))
	}
	// The backlog arrives while the job is leased, with run times before
	// the rescue.
	res, err := c.InsertMany(ctx, Notes(1, 50))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retried == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(5 * time.Millisecond)
	}
	after, err := be.JobGet(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !after.RunAt.Equal(before.RunAt) {
		t.Fatalf("rescue moved the job's run time from %v to %v; it must keep its place", before.RunAt, after.RunAt)
	}
	for _, r := range res {
		id := r.ID
		j, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !after.RunAt.Before(j.RunAt) && !after.RunAt.Equal(j.RunAt) {
			t.Fatalf("rescued job runs at %v, after backlog job %d at %v", after.RunAt, id, j.RunAt)
		}
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 100, Lease: time.Minute, ClaimID: "next"})
	if err != nil || len(rows) == 0 {
		t.Fatalf("claim after rescue: %v (%d rows)", err, len(rows))
	}
	for _, r := range rows {
		if r.ID == first {
			if r.Attempt != 2 {
				t.Fatalf("rescued job claimed at attempt %d, want 2", r.Attempt)
			}
			return
		}
	}
	t.Fatalf("a claim of the whole queue after the rescue does not include the rescued job %d", first)
}

func testRescueDiscards(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Millisecond, ClaimID: "x"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Discarded == 1 && res.Retried == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not rescued")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if j := getJob(t, be, id); j.State != backend.StateDiscarded || j.FinalizedAt == nil || len(j.Errors) != 1 {
		t.Fatalf("rescued at max attempts: %+v", j)
	}
}

func testLeaderElection(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	elect := func(id string, ttl time.Duration) bool {
		ok, err := be.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: id, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// b's attempt comes while a's term is a minute long, however slow the
	// machine; only then does a's renewal shorten the term to end.
	if !elect("a", time.Minute) || elect("b", time.Minute) || !elect("a", time.Millisecond) {
		t.Fatal("a should lead and renew; b should not")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !elect("b", time.Minute) { // a's renewed term ends by the database clock
		if time.Now().After(deadline) {
			t.Fatal("b never took over")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if elect("a", time.Minute) {
		t.Fatal("a took over a live term")
	}
	if err := be.LeaderResign(ctx, &backend.LeaderResignParams{Name: "m", ClientID: "a"}); err != nil {
		t.Fatal(err)
	}
	if elect("a", time.Minute) {
		t.Fatal("a resigning b's term freed it")
	}
	if err := be.LeaderResign(ctx, &backend.LeaderResignParams{Name: "m", ClientID: "b"}); err != nil {
		t.Fatal(err)
	}
	if !elect("a", time.Minute) {
		t.Fatal("a not elected after b resigned")
	}
}

func testRetention(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return spool.Discard(errors.New("x"))
		}
		return nil
	}))
	// Delete on completion.
	cfg := fastConfig(ws, 2)
	cfg.CompletedRetention = -1
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := be.JobGet(ctx, id)
		if errors.Is(err, backend.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed job not deleted: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	did := insert(t, c, NoteArgs{Mode: "fail"}, nil)
	waitState(t, be, did, backend.StateDiscarded)
	// Cleanup by age: a young discarded job stays; with a tiny age it goes.
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Hour, DiscardedAge: time.Hour, CancelledAge: time.Hour})
	if err != nil || n != 0 {
		t.Fatalf("cleanup removed %d young jobs (%v)", n, err)
	}
	pending := insert(t, c, NoteArgs{}, &spool.InsertOpts{Delay: time.Hour})
	deadline = time.Now().Add(10 * time.Second)
	for {
		n, err = be.JobCleanup(ctx, &backend.JobCleanupParams{DiscardedAge: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("old discarded job not cleaned")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := be.JobGet(ctx, pending); err != nil {
		t.Fatalf("cleanup touched a pending job: %v", err)
	}
}
