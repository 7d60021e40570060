package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// awaitWorkers runs note jobs in another handle: Mode "fail" fails (for
// good with MaxAttempts 1), anything else records {"n": N*10} and succeeds.
func awaitWorkers(t *testing.T, be backend.Backend) {
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return errors.New("failed on purpose")
		}
		return spool.RecordOutput(ctx, map[string]int{"n": j.Args.N * 10})
	}))
	cfg := fastConfig(ws, 2)
	cfg.AnnounceFinishes = true // where the store needs it (PostgreSQL)
	start(t, newClient(t, be, cfg))
}

// testAwaitOtherProcess: Await returns a job run by another process once it
// is final, with its output or its last error; a missing job is
// ErrNotFound, and a job that never finishes returns ctx's cause.
func testAwaitOtherProcess(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	awaitWorkers(t, h.Reopen(t, be))
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t), AllowUnknownKinds: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok := insert(t, c, NoteArgs{N: 4}, nil)
	bad := insert(t, c, NoteArgs{Mode: "fail"}, &spool.InsertOpts{MaxAttempts: 1})
	j, err := c.Await(ctx, ok)
	if err != nil {
		t.Fatalf("await job %d: %v", ok, err)
	}
	var out map[string]int
	if j.State != backend.StateCompleted || json.Unmarshal(j.Output, &out) != nil || out["n"] != 40 {
		t.Fatalf("awaited job: state %s output %s, want completed with {\"n\":40}", j.State, j.Output)
	}
	j, err = c.Await(ctx, bad)
	if err != nil {
		t.Fatalf("await job %d: %v", bad, err)
	}
	if j.State != backend.StateDiscarded || len(j.Errors) == 0 || j.Errors[len(j.Errors)-1].Error != "failed on purpose" {
		t.Fatalf("awaited failing job: state %s errors %+v, want discarded with its error", j.State, j.Errors)
	}
	// A job already final returns at once.
	if j, err := c.Await(ctx, ok); err != nil || j.State != backend.StateCompleted {
		t.Fatalf("await of a finished job: %v, %v", j, err)
	}
	if _, err := c.Await(ctx, ok+bad+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("await of a missing job: %v, want ErrNotFound", err)
	}
	never := insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "nobody"})
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if _, err := c.Await(short, never); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await of a job nobody runs: %v, want the context's deadline", err)
	}
	// A cancelled job is final too, whoever cancelled it.
	other := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	done := make(chan error, 1)
	go func() {
		j, err := c.Await(ctx, never)
		if err == nil && j.State != backend.StateCancelled {
			err = errors.New("state " + string(j.State) + ", want cancelled")
		}
		done <- err
	}()
	if _, err := other.JobCancel(ctx, never); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done, "Await of a job another process cancelled"); err != nil {
		t.Fatal(err)
	}
}

// testSubscribeAll: a subscriber of every process's events hears of jobs
// that another process finished, each once, with their kind and queue.
func testSubscribeAll(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t), AllowUnknownKinds: true})
	events, stop := c.SubscribeAll()
	defer stop()
	awaitWorkers(t, h.Reopen(t, be))
	want := map[int64]spool.EventKind{}
	for n := range 3 {
		want[insert(t, c, NoteArgs{N: n}, nil)] = spool.EventJobCompleted
	}
	want[insert(t, c, NoteArgs{Mode: "fail"}, &spool.InsertOpts{MaxAttempts: 1})] = spool.EventJobDiscarded
	seen := map[int64]bool{}
	for len(seen) < len(want) {
		e := recv(t, events, "events of jobs another process finished")
		kind, ok := want[e.JobID]
		if !ok {
			continue
		}
		if seen[e.JobID] {
			t.Fatalf("job %d reported twice", e.JobID)
		}
		seen[e.JobID] = true
		if e.Kind != kind || e.JobKind != "note" || e.Queue != spool.DefaultQueue || e.At.IsZero() {
			t.Fatalf("event %+v, want %s of a note job in the default queue", e, kind)
		}
	}
}

// testFinishedFeedPages: JobFinishedSince pages through jobs finished in
// one batch (one finish time for all of them, on most stores) by finish
// time and id, each job once, none skipped; a finish listed is final.
func testFinishedFeedPages(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	params := make([]spool.InsertManyParams, 30)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: NoteArgs{N: i}, InsertOpts: &spool.InsertOpts{Queue: "feed"}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "feed", Max: 30, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 30 {
		t.Fatalf("claim: %d jobs, %v; want 30", len(rows), err)
	}
	fins := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		fins[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
		if i%10 == 0 {
			fins[i].Outcome = backend.OutcomeDiscard
		}
	}
	if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fins}); err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %+v, %v", res, err)
	}
	p := &backend.JobFinishedSinceParams{Since: before, Limit: 7}
	seen := map[int64]bool{}
	var last *backend.FinishedJob
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("more than 10 pages of 7 for 30 jobs: the keyset does not advance (at %+v)", p)
		}
		jobs, err := be.JobFinishedSince(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %d listed twice", j.ID)
			}
			seen[j.ID] = true
			if last != nil && (j.FinalizedAt.Before(last.FinalizedAt) || (j.FinalizedAt.Equal(last.FinalizedAt) && j.ID < last.ID)) {
				t.Fatalf("job %d at %s listed after job %d at %s", j.ID, j.FinalizedAt, last.ID, last.FinalizedAt)
			}
			want := backend.StateCompleted
			if fins[0].Lease.ID == j.ID || fins[10].Lease.ID == j.ID || fins[20].Lease.ID == j.ID {
				want = backend.StateDiscarded
			}
			if j.State != want || j.Kind != "note" || j.Queue != "feed" {
				t.Fatalf("listed %+v, want a %s note job of queue feed", j, want)
			}
			last = j
		}
		if len(jobs) < p.Limit {
			break
		}
		p.Since, p.AfterID = last.FinalizedAt, last.ID
	}
	if len(seen) != 30 {
		t.Fatalf("listed %d jobs, want the 30 finished", len(seen))
	}
}
