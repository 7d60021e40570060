package backendtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testCancelJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, nil)
	j, err := c.JobCancel(ctx, id)
	if err != nil || j.State != backend.StateCancelled || j.FinalizedAt == nil {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if _, err := c.JobCancel(ctx, id); !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := c.JobCancel(ctx, id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	if _, err := c.JobGet(ctx, id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if rows, _ := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"}); len(rows) != 0 {
		t.Fatal("cancelled job was claimed")
	}
}

func testRetryDiscarded(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var fail atomic.Bool
	fail.Store(true)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if fail.Load() {
			return errors.New("broken")
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 2})
	dead := waitState(t, be, id, backend.StateDiscarded)
	fail.Store(false)
	j, err := c.JobRetry(context.Background(), id)
	if err != nil || j.State != backend.StateAvailable || j.Attempt != 0 || j.FinalizedAt != nil {
		t.Fatalf("retry: %+v %v", j, err)
	}
	done := waitState(t, be, id, backend.StateCompleted)
	if done.Attempt != 1 || done.Fence != dead.Fence+1 || len(done.Errors) != 2 {
		t.Fatalf("after manual retry: attempt %d fence %d (was %d) errors %d", done.Attempt, done.Fence, dead.Fence, len(done.Errors))
	}
	if _, err := c.JobRetry(context.Background(), id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("retry missing: %v", err)
	}
}
