package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testLocalWake: with polling an hour apart, a delayed job inserted by this
// client and a retry it wrote must still run when due: the client wakes its
// own producer for due times it knows.
func testLocalWake(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan NoteArgs, 4)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, delayWorker{
		Worker: spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
			ran <- j.Args
			if j.Args.Mode == "fail-once" && j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}),
		delay: 200 * time.Millisecond,
	})
	cfg := fastConfig(ws, 2)
	cfg.PollInterval = time.Hour
	c := newClient(t, be, cfg)
	start(t, c)
	delayed := insert(t, c, NoteArgs{N: 1}, &spool.InsertOpts{Delay: 200 * time.Millisecond})
	if a := recv(t, ran, "delayed job"); a.N != 1 {
		t.Fatalf("ran %+v", a)
	}
	waitState(t, be, delayed, backend.StateCompleted)
	retried := insert(t, c, NoteArgs{N: 2, Mode: "fail-once"}, nil)
	recv(t, ran, "first attempt")
	recv(t, ran, "retry after 200ms")
	if j := waitState(t, be, retried, backend.StateCompleted); j.Attempt != 2 {
		t.Fatalf("retried job: %+v", j)
	}
	// A later due time known first, then an earlier one: both must fire.
	later := insert(t, c, NoteArgs{N: 3}, &spool.InsertOpts{Delay: 700 * time.Millisecond})
	insert(t, c, NoteArgs{N: 4, Mode: "fail-once"}, nil)
	seen := map[int]int{}
	for len(seen) < 2 || seen[4] < 2 {
		seen[recv(t, ran, "the later delayed job and the earlier retry").N]++
	}
	waitState(t, be, later, backend.StateCompleted)
}
