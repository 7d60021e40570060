package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/spooltest"
)

// testHelpers: the spooltest helpers work on every backend: a job inserted
// in an open transaction is found through it and not outside it, found
// outside once committed; Work runs the client's worker at once and
// returns the job as stored, completed or failed.
func testHelpers(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return errors.New("refused")
		}
		return nil
	}))
	c := newClient(t, be, &spool.Config{Workers: ws, Logger: quietLogger()})
	ctx := context.Background()
	tx := h.BeginTx(t, be)
	if _, err := c.InsertTx(ctx, btx(tx), NoteArgs{N: 7, Mode: "tx"}, &spool.InsertOpts{Queue: "helpers"}); err != nil {
		t.Fatal(err)
	}
	in := spooltest.RequireInsertedTx(ctx, t, c, btx(tx), NoteArgs{N: 7}, &spooltest.Opts{Queue: "helpers"})
	if in.Queue != "helpers" {
		t.Fatalf("found job in queue %s", in.Queue)
	}
	spooltest.RequireNotInserted(ctx, t, c, NoteArgs{N: 7}, nil)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	spooltest.RequireInserted(ctx, t, c, NoteArgs{N: 7, Mode: "tx"}, nil)
	spooltest.RequireNotInserted(ctx, t, c, NoteArgs{N: 8}, nil)

	if j := spooltest.Work(ctx, t, c, NoteArgs{N: 1}, nil); j.State != backend.StateCompleted || j.Attempt != 1 {
		t.Fatalf("worked job: %s attempt %d, want completed at attempt 1", j.State, j.Attempt)
	}
	if j := spooltest.Work(ctx, t, c, NoteArgs{N: 2, Mode: "fail"}, nil); j.State != backend.StateRetryable || len(j.Errors) != 1 || j.Errors[0].Error != "refused" {
		t.Fatalf("failed job: %s %+v, want retryable with the error", j.State, j.Errors)
	}
}
