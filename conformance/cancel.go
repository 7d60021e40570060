package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// cancelReach is how soon a cancellation made by another process must
// reach a running job's handler (issue: "cancel reaches a running job in
// any process within one second").
const cancelReach = time.Second

// testCancelReachesOtherProcess: a job running in one process is cancelled
// through another handle on the store (another process), singly and in
// bulk; each handler's context ends within a second, although the lease is
// long enough that no heartbeat falls in that second, and the handler's
// later return does not overwrite the cancellation.
func testCancelReachesOtherProcess(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	other := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger()})
	type started struct {
		id  int64
		ctx context.Context
	}
	starts := make(chan started, 4)
	ended := make(chan time.Time, 4)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		starts <- started{j.ID, ctx}
		<-ctx.Done()
		ended <- time.Now()
		return nil // a completion the store must refuse
	}))
	cfg := fastConfig(ws, 4)
	// Heartbeats every 20 s: a cancellation that waited for one would take
	// far longer than cancelReach.
	cfg.LeaseDuration = time.Minute
	cfg.RescueInterval = time.Minute
	c := newClient(t, be, cfg)
	start(t, c)
	ctx := context.Background()

	var ids []int64
	for round, bulk := range []bool{false, true} {
		id := insert(t, c, NoteArgs{N: round}, &spool.InsertOpts{Queue: spool.DefaultQueue})
		s := recv(t, starts, "the job's start")
		if s.id != id {
			t.Fatalf("started job %d, want %d", s.id, id)
		}
		at := time.Now()
		if bulk {
			res, err := other.JobsCancel(ctx, spool.JobFilter{States: []spool.JobState{spool.JobStateRunning}})
			if err != nil || res.Changed != 1 {
				t.Fatalf("bulk cancel from another process: %+v, %v", res, err)
			}
		} else if _, err := other.JobCancel(ctx, id); err != nil {
			t.Fatalf("cancel from another process: %v", err)
		}
		var took time.Duration
		select {
		case end := <-ended:
			took = end.Sub(at)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the handler still runs 10 s after the cancellation", round)
		}
		if took > cancelReach {
			t.Fatalf("round %d (bulk %v): the cancellation reached the handler after %v, want within %v", round, bulk, took, cancelReach)
		}
		if s.ctx.Err() == nil {
			t.Fatalf("round %d: handler returned with its context not cancelled", round)
		}
		ids = append(ids, id)
	}
	// Stopping flushes the outcome writer: the handlers' completions have
	// been sent, and refused, by the time it returns.
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, id := range ids {
		if j := getJob(t, be, id); j.State != backend.StateCancelled {
			t.Fatalf("job %d is %s after its handler returned, want cancelled", id, j.State)
		}
	}
}
