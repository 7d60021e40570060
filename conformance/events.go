package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolq/spool"
)

// testEvents: on every backend, a client reports the outcomes the store
// applied: a completion, a failed attempt that will be retried, and the
// discard after the last attempt, each once.
func testEvents(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return errors.New("always fails")
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	events, end := c.Subscribe()
	defer end()
	start(t, c)
	ok := insert(t, c, NoteArgs{N: 1}, nil)
	bad := insert(t, c, NoteArgs{N: 2, Mode: "fail"}, &spool.InsertOpts{MaxAttempts: 2})
	got := map[int64][]spool.EventKind{}
	for range 3 {
		e := recv(t, events, "an event")
		got[e.JobID] = append(got[e.JobID], e.Kind)
	}
	if k := got[ok]; len(k) != 1 || k[0] != spool.EventJobCompleted {
		t.Errorf("job %d: events %v, want [job_completed]", ok, k)
	}
	if k := got[bad]; len(k) != 2 || k[0] != spool.EventJobFailed || k[1] != spool.EventJobDiscarded {
		t.Errorf("job %d: events %v, want [job_failed job_discarded]", bad, k)
	}
}
