package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testRetryThenSucceed(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Attempt < 3 {
			return fmt.Errorf("boom %d", j.Attempt)
		}
		if len(j.Errors) != 2 || j.Errors[1].Error != "boom 2" {
			return spool.Discard(fmt.Errorf("history not visible to the worker: %+v", j.Errors))
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 3 || len(j.Errors) != 2 || j.Errors[0].Error != "boom 1" || j.Errors[0].Attempt != 1 || j.Errors[0].At.IsZero() {
		t.Fatalf("after retries: attempt %d errors %+v", j.Attempt, j.Errors)
	}
}

type delayWorker struct {
	spool.Worker[NoteArgs]
	delay time.Duration
}

// NextRetry implements spool.WorkerNextRetry.
func (w delayWorker) NextRetry(*spool.Job[NoteArgs]) time.Duration { return w.delay }

func testRetryBackoff(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, delayWorker{
		Worker: spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return errors.New("fail") }),
		delay:  time.Hour,
	})
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	j := waitState(t, be, id, backend.StateRetryable)
	// run_at is the database's now plus the worker's backoff; the attempt
	// started before that now.
	wait := j.RunAt.Sub(*j.AttemptedAt)
	if wait < time.Hour || wait > time.Hour+time.Minute {
		t.Fatalf("retry scheduled %s after the attempt, want about 1h", wait)
	}
	if j.LeasedUntil != nil || j.FinalizedAt != nil || j.Attempt != 1 {
		t.Fatalf("retryable job: %+v", j)
	}
}

func testMaxAttemptsDiscards(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		runs.Add(1)
		return errors.New("always")
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 3})
	j := waitState(t, be, id, backend.StateDiscarded)
	if j.Attempt != 3 || len(j.Errors) != 3 || j.FinalizedAt == nil {
		t.Fatalf("discarded: attempt %d errors %d finalized %v", j.Attempt, len(j.Errors), j.FinalizedAt)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("ran %d times, want 3", n)
	}
}

func testSnooze(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if runs.Add(1) <= 2 {
			return spool.Snooze(10 * time.Millisecond)
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	j := waitState(t, be, id, backend.StateCompleted)
	// Snoozes use no attempt (MaxAttempts 1 still completes); fences advance.
	if j.Attempt != 1 || j.Fence != 3 || len(j.Errors) != 0 || runs.Load() != 3 {
		t.Fatalf("after snoozes: attempt %d fence %d errors %v runs %d", j.Attempt, j.Fence, j.Errors, runs.Load())
	}
	// A long snooze leaves the job scheduled.
	ws2 := spool.NewWorkers()
	spool.AddWorker(ws2, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return spool.Snooze(time.Hour) }))
	be2 := h.NewBackend(t)
	c2 := newClient(t, be2, fastConfig(ws2, 1))
	start(t, c2)
	id = insert(t, c2, NoteArgs{}, nil)
	j = waitState(t, be2, id, backend.StateScheduled)
	if j.Attempt != 0 || j.RunAt.Sub(*j.AttemptedAt) < time.Hour-time.Minute {
		t.Fatalf("snoozed job: %+v", j)
	}
}

func testCancelAndDiscardOutcomes(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		switch j.Args.Mode {
		case "cancel":
			return spool.Cancel(errors.New("no longer wanted"))
		case "discard":
			return spool.Discard(errors.New("hopeless"))
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	cid := insert(t, c, NoteArgs{Mode: "cancel"}, nil)
	did := insert(t, c, NoteArgs{Mode: "discard"}, nil)
	j := waitState(t, be, cid, backend.StateCancelled)
	if len(j.Errors) != 1 || j.Errors[0].Error != "no longer wanted" || j.FinalizedAt == nil {
		t.Fatalf("cancelled: %+v", j)
	}
	j = waitState(t, be, did, backend.StateDiscarded)
	if len(j.Errors) != 1 || j.Errors[0].Error != "hopeless" || j.Attempt != 1 {
		t.Fatalf("discarded: %+v", j)
	}
}

func testUndecodableArgs(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return nil }))
	c := newClient(t, be, fastConfig(ws, 1))
	// Written by another program with a payload that does not fit NoteArgs.
	id := insert(t, c, spool.RawArgs("note", json.RawMessage(`{"n": "not a number"}`)), nil)
	start(t, c)
	j := waitState(t, be, id, backend.StateDiscarded)
	if j.Attempt != 1 || len(j.Errors) != 1 {
		t.Fatalf("undecodable job: %+v", j)
	}
}

func testPanicRecorded(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "panic" && j.Attempt == 1 {
			panic("kaboom")
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	pid := insert(t, c, NoteArgs{Mode: "panic"}, nil)
	j := waitState(t, be, pid, backend.StateCompleted)
	if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Error != "panic: kaboom" || j.Errors[0].Trace == "" {
		t.Fatalf("after panic: attempt %d errors %+v", j.Attempt, j.Errors)
	}
	// The worker loop goes on.
	waitState(t, be, insert(t, c, NoteArgs{}, nil), backend.StateCompleted)
}

type timeoutWorker struct{ spool.Worker[NoteArgs] }

// Timeout implements spool.WorkerTimeout.
func (timeoutWorker) Timeout(*spool.Job[NoteArgs]) time.Duration { return 50 * time.Millisecond }

func testTimeout(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	causes := make(chan error, 2)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, timeoutWorker{spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		<-ctx.Done()
		causes <- ctx.Err()
		return ctx.Err()
	})})
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	if err := recv(t, causes, "timeout"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx err = %v", err)
	}
	j := waitState(t, be, id, backend.StateDiscarded)
	if len(j.Errors) != 1 || !contains(j.Errors[0].Error, "timed out after 50ms") {
		t.Fatalf("timeout error: %+v", j.Errors)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// testTimeoutOverrun: a handler that ignores its context and runs past its
// timeout is recorded as such, not as a crash found by rescue when its lease
// ends.
func testTimeoutOverrun(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	overrunOnce(t, be, be)
}

// overrunOnce runs one job on a client of be whose first attempt ignores
// its context past its 50 ms timeout, and checks, reading inner, that the
// overrun is recorded (not a lease expiry) and attempt 2 completes it.
func overrunOnce(t *testing.T, be, inner backend.Backend) {
	t.Helper()
	release := make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, timeoutWorker{spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Attempt == 1 {
			<-release // ignores ctx
		}
		return nil
	})})
	// The overrun is found by a heartbeat and retried after one lease: a
	// short lease (shortLease, a beat every second) keeps the test within
	// seconds. The first attempt must reach its handler, so the claim's
	// reply must come within half the lease (a later reply releases the
	// job unstarted) and within the whole lease (else rescue takes it
	// first, recording a lease expiry). A CI machine running every
	// module's tests under -race on two cores delayed a claim's reply by
	// 1.5 s, past the 1-s lease this test had.
	cfg := fastConfig(ws, 2)
	cfg.LeaseDuration = shortLease
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	// The retry is written about a heartbeat interval after the 50ms
	// timeout, runs after one lease, and succeeds at attempt 2.
	j := waitState(t, inner, id, backend.StateCompleted)
	if j.Attempt != 2 || len(j.Errors) != 1 {
		t.Fatalf("attempt %d errors %+v, want attempt 2 after one recorded error", j.Attempt, j.Errors)
	}
	if e := j.Errors[0].Error; !contains(e, "timed out after 50ms") || !contains(e, "ignores its context") || contains(e, "lease expired") {
		t.Fatalf("recorded error %q, want the timeout overrun, not a lease expiry", e)
	}
}

// failingRetries is a backend whose next writes of retry outcomes fail, as
// a write that outlasts its deadline on a loaded machine does.
type failingRetries struct {
	backend.Backend
	fail atomic.Int32 // writes left to fail
}

func (b *failingRetries) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	for _, f := range p.Finishes {
		if f.Outcome == backend.OutcomeRetry && b.fail.Add(-1) >= 0 {
			return nil, fmt.Errorf("finish jobs: %w", context.DeadlineExceeded)
		}
	}
	return b.Backend.JobFinishMany(ctx, p)
}

// testTimeoutOverrunWriteFails: the retry of a handler that overran its
// timeout cannot be written at the first two tries. Its lease is extended
// until it is, so rescue never takes the job as if its worker had crashed.
func testTimeoutOverrunWriteFails(t *testing.T, h Harness) {
	inner := h.NewBackend(t)
	be := &failingRetries{Backend: inner}
	be.fail.Store(2)
	// Without the extension the lease ends 3 s after the claim, while the
	// third try comes about 4 s after it (a beat every second), and rescue
	// runs every 50 ms.
	overrunOnce(t, be, inner)
	if n := be.fail.Load(); n > 0 {
		t.Fatalf("the retry's writes did not fail as arranged (%d failures left)", n)
	}
}

// testFinishManyMixed writes one batch of every outcome over a few hundred
// jobs, each failure with an error text of its own, plus a stale lease, and
// checks every row: a backend that splits or groups such a batch internally
// must still apply each outcome to its own job, and only to it.
func testFinishManyMixed(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	const kinds, per = 9, 30
	jobs := make([]*backend.JobInsertParams, kinds*per)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: spool.DefaultQueue, Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
		if i%kinds == 3 {
			jobs[i].MaxAttempts = 1 // its retry discards it
		}
	}
	ins, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil || len(ins.IDs) != len(jobs) {
		t.Fatalf("insert: %v", err)
	}
	kindOf := map[int64]int{}
	for i, id := range ins.IDs {
		kindOf[id] = i % kinds
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: len(jobs), Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != len(jobs) {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	errText := func(id int64) string { return fmt.Sprintf("failure of job %d", id) }
	var fs []backend.JobFinish
	for _, r := range rows {
		f := backend.JobFinish{Lease: r.Lease()}
		fail := &backend.AttemptError{Attempt: int(r.Attempt), Error: errText(r.ID)}
		if r.ID%2 == 0 {
			fail.Trace = fmt.Sprintf("trace of job %d", r.ID)
		}
		switch kindOf[r.ID] {
		case 0:
			f.Outcome = backend.OutcomeComplete
		case 1:
			f.Outcome, f.Error = backend.OutcomeComplete, fail
		case 2:
			f.Outcome, f.Delay, f.Error = backend.OutcomeRetry, time.Hour+time.Duration(r.ID)*time.Second, fail
		case 3:
			f.Outcome, f.Delay, f.Error = backend.OutcomeRetry, time.Hour, fail
		case 4:
			f.Outcome = backend.OutcomeSnooze
		case 5:
			f.Outcome, f.Delay = backend.OutcomeSnooze, time.Hour
		case 6:
			f.Outcome, f.Error = backend.OutcomeCancel, fail
		case 7:
			f.Outcome, f.Error = backend.OutcomeDiscard, fail
		default:
			f.Outcome = backend.OutcomeRelease
		}
		fs = append(fs, f)
	}
	stale := rows[0].Lease()
	stale.Fence--
	fs = append(fs, backend.JobFinish{Lease: stale, Outcome: backend.OutcomeCancel})
	before := time.Now()
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if len(res.Rejected) != 1 || res.Rejected[0] != stale {
		t.Fatalf("rejected %v, want only the stale lease %v", res.Rejected, stale)
	}
	for _, r := range rows {
		got, err := be.JobGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		k := kindOf[r.ID]
		want := map[int]backend.State{0: backend.StateCompleted, 1: backend.StateCompleted, 2: backend.StateRetryable, 3: backend.StateDiscarded,
			4: backend.StateAvailable, 5: backend.StateScheduled, 6: backend.StateCancelled, 7: backend.StateDiscarded, 8: backend.StateAvailable}[k]
		attempt := int16(1)
		if k == 4 || k == 5 || k == 8 {
			attempt = 0 // snooze and release give the attempt back
		}
		failed := k == 1 || k == 2 || k == 3 || k == 6 || k == 7
		final := want == backend.StateCompleted || want == backend.StateCancelled || want == backend.StateDiscarded
		switch {
		case got.State != want:
			t.Fatalf("job %d (outcome case %d): state %s, want %s", r.ID, k, got.State, want)
		case got.Attempt != attempt:
			t.Fatalf("job %d (outcome case %d): attempt %d, want %d", r.ID, k, got.Attempt, attempt)
		case (got.FinalizedAt != nil) != final:
			t.Fatalf("job %d (outcome case %d): finalized_at %v, want set=%v", r.ID, k, got.FinalizedAt, final)
		case got.LeasedBy != "" || got.LeasedUntil != nil:
			t.Fatalf("job %d (outcome case %d): still leased by %q until %v", r.ID, k, got.LeasedBy, got.LeasedUntil)
		}
		if !failed {
			if len(got.Errors) != 0 {
				t.Fatalf("job %d (outcome case %d): errors %+v, want none", r.ID, k, got.Errors)
			}
		} else {
			wantTrace := ""
			if r.ID%2 == 0 {
				wantTrace = fmt.Sprintf("trace of job %d", r.ID)
			}
			if len(got.Errors) != 1 || got.Errors[0].Error != errText(r.ID) || got.Errors[0].Trace != wantTrace || got.Errors[0].Attempt != 1 {
				t.Fatalf("job %d (outcome case %d): errors %+v, want one with %q and trace %q", r.ID, k, got.Errors, errText(r.ID), wantTrace)
			}
		}
		var delay time.Duration
		switch k {
		case 2:
			delay = time.Hour + time.Duration(r.ID)*time.Second
		case 5:
			delay = time.Hour
		}
		if delay > 0 {
			// The store's clock adds the delay; allow for clock skew between
			// this process and the database and for the write's duration.
			if lo, hi := before.Add(delay-time.Minute), time.Now().Add(delay+time.Minute); got.RunAt.Before(lo) || got.RunAt.After(hi) {
				t.Fatalf("job %d (outcome case %d): run_at %v, want about %v from now", r.ID, k, got.RunAt, delay)
			}
		}
	}
}
