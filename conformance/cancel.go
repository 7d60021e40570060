package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// cancelReach bounds how long after a cancellation made by another
// process a running job's handler may still run: less than the first
// heartbeat (LeaseDuration/3, 20 s here) could take, so that only the
// cancellation's own wake-up can have carried it. How fast that wake-up
// is (well within a second on a quiet machine) is a latency, and a test
// on a loaded machine cannot time it: one such run saw 1.07 s.
const cancelReach = 15 * time.Second

// testCancelReachesOtherProcess: a job running in one process is cancelled
// through another handle on the store (another process), singly and in
// bulk; each handler's context ends before a heartbeat could have told its
// process (the lease is long enough that none falls in that time), and
// the handler's later return does not overwrite the cancellation.
func testCancelReachesOtherProcess(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	other := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
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
	// longer than cancelReach.
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
		select {
		case end := <-ended:
			t.Logf("round %d (bulk %v): the cancellation reached the handler after %v", round, bulk, end.Sub(at))
		case <-time.After(cancelReach - time.Since(at)):
			t.Fatalf("round %d (bulk %v): the handler still runs %v after the cancellation, as long as a heartbeat could take to tell its process", round, bulk, cancelReach)
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
