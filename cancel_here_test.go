package spool_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
)

// TestCancelHereNeedsNoWakeUp: a job cancelled through the client that
// runs it has its handler cancelled at once, by every way of cancelling
// (one job, a filter, its workflow), with no wake-up to carry it (PollOnly)
// and well before a heartbeat (every 20 s here) could have told it.
func TestCancelHereNeedsNoWakeUp(t *testing.T) {
	for _, way := range []string{"JobCancel", "JobsCancel", "WorkflowCancel"} {
		t.Run(way, func(t *testing.T) {
			ctx := context.Background()
			started := make(chan int64, 1)
			ended := make(chan error, 1)
			ws := spool.NewWorkers()
			spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[longArgs]) error {
				started <- j.ID
				<-ctx.Done()
				ended <- context.Cause(ctx)
				return context.Cause(ctx)
			}))
			c, err := spool.NewClient(migratedMemory(t), &spool.Config{
				Workers:       ws,
				Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
				LeaseDuration: time.Minute,
				PollOnly:      true,
				Logger:        conformance.TestLogger(t, slog.LevelWarn),
			})
			if err != nil {
				t.Fatal(err)
			}
			var id, workflow int64
			if way == "WorkflowCancel" {
				wf, err := c.InsertWorkflow(ctx, spool.NewWorkflow("w").Add("only", longArgs{}, nil))
				if err != nil {
					t.Fatal(err)
				}
				workflow = wf.ID
			} else {
				res, err := c.Insert(ctx, longArgs{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				id = res.ID
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Stop(ctx) }()
			if got := <-started; id != 0 && got != id {
				t.Fatalf("job %d started, want %d", got, id)
			}
			switch way {
			case "JobCancel":
				_, err = c.JobCancel(ctx, id)
			case "JobsCancel":
				var res spool.BulkResult
				res, err = c.JobsCancel(ctx, spool.JobFilter{Kind: longArgs{}.Kind(), States: []spool.JobState{spool.JobStateRunning}})
				if err == nil && res.Changed != 1 {
					t.Fatalf("JobsCancel changed %d jobs, want 1", res.Changed)
				}
			case "WorkflowCancel":
				_, err = c.WorkflowCancel(ctx, workflow)
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case cause := <-ended:
				if !errors.Is(cause, spool.ErrLeaseLost) {
					t.Fatalf("handler ended with cause %v, want ErrLeaseLost", cause)
				}
			case <-time.After(15 * time.Second): // before the first heartbeat, 20 s in
				t.Fatal("the handler was not cancelled within 15 s of its own client's cancel: only a heartbeat would tell it")
			}
		})
	}
}
