package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testOutputAndMetadata: a handler's metadata updates are visible to other
// processes while it runs and merge with the inserted metadata; its output
// is stored with the job; a cancelled job's handler can record nothing
// (ErrLeaseLost); outside a job, or too large, nothing is written.
func testOutputAndMetadata(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	other := h.Reopen(t, be)
	ctx := context.Background()
	halfway := make(chan int64, 1)
	release := make(chan struct{})
	lost := make(chan error, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		switch j.Args.Mode {
		case "cancel":
			halfway <- j.ID
			<-ctx.Done()
			lost <- spool.RecordOutput(context.WithoutCancel(ctx), "too late")
			return nil
		case "big":
			err := spool.RecordOutput(ctx, strings.Repeat("x", spool.MaxOutputBytes))
			var ie *spool.InvalidJobError
			if !errors.As(err, &ie) {
				return errors.New("oversized output accepted: " + errString(err))
			}
			return nil
		}
		if err := spool.UpdateMetadata(ctx, map[string]any{"progress": 50, "step": "sending"}); err != nil {
			return err
		}
		halfway <- j.ID
		<-release
		if err := spool.UpdateMetadata(ctx, map[string]any{"progress": 100, "step": nil}); err != nil {
			return err
		}
		return spool.RecordOutput(ctx, map[string]int{"sent": 3})
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)

	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{Metadata: json.RawMessage(`{"team":"mail"}`)})
	recv(t, halfway, "the handler's first update")
	j, err := other.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, j.Metadata, json.RawMessage(`{"team":"mail","progress":50,"step":"sending"}`)) || j.Output != nil {
		t.Fatalf("while running: metadata %s output %s", j.Metadata, j.Output)
	}
	close(release)
	done := waitState(t, be, id, backend.StateCompleted)
	if !jsonEqual(t, done.Metadata, json.RawMessage(`{"team":"mail","progress":100}`)) || !jsonEqual(t, done.Output, json.RawMessage(`{"sent":3}`)) {
		t.Fatalf("completed: metadata %s output %s", done.Metadata, done.Output)
	}

	cid := insert(t, c, NoteArgs{Mode: "cancel"}, nil)
	recv(t, halfway, "the cancel job's start")
	if _, err := c.JobCancel(ctx, cid); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, lost, "the cancelled handler's record"); !errors.Is(err, spool.ErrLeaseLost) {
		t.Fatalf("record after cancel: %v, want ErrLeaseLost", err)
	}
	if j := getJob(t, be, cid); j.Output != nil {
		t.Fatalf("cancelled job's output %s, want none", j.Output)
	}

	big := insert(t, c, NoteArgs{Mode: "big"}, nil)
	if j := waitState(t, be, big, backend.StateCompleted); j.Output != nil {
		t.Fatalf("oversized output stored: %d bytes", len(j.Output))
	}
	if err := spool.RecordOutput(ctx, 1); !errors.Is(err, spool.ErrNotInJob) {
		t.Fatalf("record outside a job: %v, want ErrNotInJob", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
