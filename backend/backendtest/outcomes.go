package backendtest

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
	release := make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, timeoutWorker{spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Attempt == 1 {
			<-release // ignores ctx
		}
		return nil
	})})
	cfg := fastConfig(ws, 2)
	cfg.LeaseDuration = 600 * time.Millisecond
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	// The retry is written about a heartbeat interval after the 50ms
	// timeout, runs after one lease, and succeeds at attempt 2.
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 2 || len(j.Errors) != 1 {
		t.Fatalf("attempt %d errors %+v, want attempt 2 after one recorded error", j.Attempt, j.Errors)
	}
	if e := j.Errors[0].Error; !contains(e, "timed out after 50ms") || !contains(e, "ignores its context") || contains(e, "lease expired") {
		t.Fatalf("recorded error %q, want the timeout overrun, not a lease expiry", e)
	}
}
