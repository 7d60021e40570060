package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

type ctxKey struct{}

// A job's one context: its deadline (ended by the running set's timer),
// its Run, the parent's values, and each cause of its end seen by the
// handler's context and by contexts derived from it.
func TestJobContext(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	row := &backend.JobRow{ID: 7, Fence: 3}

	start := time.Now()
	ctx, cancel := newJobContext(parent, nil, row, start, 30*time.Millisecond)
	defer cancel(nil)
	running := newRunningJobs()
	running.add(&runningJob{lease: row.Lease(), started: start, timeout: 30 * time.Millisecond, ctx: ctx, cancel: cancel})
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
		t.Fatalf("deadline %v %v, want within the 30 ms timeout", d, ok)
	}
	if r, ok := RunFrom(ctx); !ok || r.ID() != 7 {
		t.Fatalf("RunFrom: %v %v, want the job's run", r, ok)
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	derived, stop := context.WithCancel(ctx)
	defer stop()
	if d1, _ := derived.Deadline(); d1.IsZero() {
		t.Fatal("a derived context does not see the job's deadline")
	}
	select {
	case <-derived.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout did not end the run")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after the timeout = %v, want context.DeadlineExceeded", ctx.Err())
	}
	for name, c := range map[string]context.Context{"job": ctx, "derived": derived} {
		if cause := context.Cause(c); cause != errJobTimeout || !errors.Is(cause, context.DeadlineExceeded) {
			t.Fatalf("%s context's cause %v, want errJobTimeout matching context.DeadlineExceeded", name, cause)
		}
	}

	// A lost lease: the cause reaches the handler's context, whose Err is
	// context.Canceled; no deadline without a timeout.
	ctx, cancel = newJobContext(parent, nil, row, time.Now(), 0)
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a job without a timeout reports a deadline")
	}
	cancel(ErrLeaseLost)
	if !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != ErrLeaseLost {
		t.Fatalf("after a lost lease: Err %v, cause %v", ctx.Err(), context.Cause(ctx))
	}
}

// A hard stop cancels the jobs held and every job added after it.
func TestRunningStopAll(t *testing.T) {
	r := newRunningJobs()
	add := func(id int64) *jobContext {
		ctx, cancel := newJobContext(context.Background(), nil, &backend.JobRow{ID: id}, time.Now(), time.Minute)
		t.Cleanup(func() { cancel(nil) })
		r.add(&runningJob{lease: backend.LeaseRef{ID: id}, ctx: ctx, cancel: cancel})
		return ctx
	}
	before := add(1)
	if before.Err() != nil {
		t.Fatal("a job is cancelled before any stop")
	}
	r.stopAll(ErrClientStopping)
	after := add(2)
	for name, c := range map[string]context.Context{"held": before, "added after": after} {
		if context.Cause(c) != ErrClientStopping {
			t.Fatalf("%s job: cause %v, want ErrClientStopping", name, context.Cause(c))
		}
	}
}

// The running set's one timer ends each run at its own deadline: a job that
// finished before its deadline leaves the timer armed for it, and the timer
// then arms itself for the next deadline; a job added with an earlier
// deadline than the armed one is ended first; a job without a timeout is
// never ended.
func TestRunningTimeouts(t *testing.T) {
	r := newRunningJobs()
	start := time.Now()
	add := func(id int64, timeout time.Duration) *jobContext {
		ctx, cancel := newJobContext(context.Background(), nil, &backend.JobRow{ID: id}, start, timeout)
		t.Cleanup(func() { cancel(nil) })
		r.add(&runningJob{lease: backend.LeaseRef{ID: id}, started: start, timeout: timeout, ctx: ctx, cancel: cancel})
		return ctx
	}
	finished := add(1, 40*time.Millisecond)
	late := add(2, 120*time.Millisecond)
	early := add(3, 20*time.Millisecond)
	never := add(4, 0)
	r.mu.Lock()
	armed := r.timerAt
	r.mu.Unlock()
	if !armed.Equal(early.deadline) {
		t.Fatalf("the timer is armed for %v, want the earliest deadline %v", armed, early.deadline)
	}
	r.handlerDone(backend.LeaseRef{ID: 1})
	r.remove([]backend.LeaseRef{{ID: 1}})

	for _, c := range []struct {
		name string
		ctx  *jobContext
		at   time.Duration
	}{{"early", early, 20 * time.Millisecond}, {"late", late, 120 * time.Millisecond}} {
		select {
		case <-c.ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the %s job was not ended by its timeout", c.name)
		}
		if took := time.Since(start); took < c.at {
			t.Fatalf("the %s job ended after %s, before its %s timeout", c.name, took, c.at)
		}
		if context.Cause(c.ctx) != errJobTimeout {
			t.Fatalf("the %s job's cause: %v, want errJobTimeout", c.name, context.Cause(c.ctx))
		}
	}
	if finished.Err() != nil || never.Err() != nil {
		t.Fatalf("ended without a timeout passing: finished job %v, job without a timeout %v", finished.Err(), never.Err())
	}
	r.mu.Lock()
	armed = r.timerAt
	r.mu.Unlock()
	if !armed.IsZero() {
		t.Fatalf("the timer is armed for %v with no deadline left", armed)
	}
}

// A lease found lost is news once: a second beat that finds it lost (two
// beats in flight, or a cancellation's own beat beside its wake-up's)
// neither cancels nor counts it again, nor does a lease that ended
// unextended and is then found lost.
func TestRunningLostLeaseCountedOnce(t *testing.T) {
	r := newRunningJobs()
	add := func(id int64, heldUntil time.Time) backend.LeaseRef {
		ctx, cancel := newJobContext(context.Background(), nil, &backend.JobRow{ID: id}, time.Now(), 0)
		t.Cleanup(func() { cancel(nil) })
		l := backend.LeaseRef{ID: id, Fence: 1}
		r.add(&runningJob{lease: l, queue: "q", ctx: ctx, cancel: cancel, heldUntil: heldUntil})
		return l
	}
	lost := add(1, time.Time{})
	for i, want := range []int{1, 0} {
		if running, _ := r.sortLost([]backend.LeaseRef{lost}); len(running) != want {
			t.Fatalf("beat %d: sortLost gave %d running leases, want %d", i+1, len(running), want)
		}
		cancelled, byQueue := r.cancelRunning([]backend.LeaseRef{lost}, ErrLeaseLost)
		if len(cancelled) != want || byQueue["q"] != want {
			t.Fatalf("beat %d: cancelled %v (by queue %v), want %d", i+1, cancelled, byQueue, want)
		}
	}
	ended := add(2, time.Now().Add(-time.Millisecond))
	r.expire()
	if cancelled, _ := r.cancelRunning([]backend.LeaseRef{ended}, ErrLeaseLost); len(cancelled) != 0 {
		t.Fatalf("a lease that ended unextended was counted again when found lost: %v", cancelled)
	}
}
