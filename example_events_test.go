package spool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExampleClient_Subscribe follows a job's outcomes as the store applies
// them: a failed attempt, with the delay before the next, then the
// completion. See docs/events.md.
func ExampleClient_Subscribe() {
	ctx := context.Background()
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		if job.Attempt == 1 {
			return errors.New("mail server busy")
		}
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:     workers,
		Queues:      map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		RetryPolicy: quickRetries{},
		Logger:      quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	events, end := client.Subscribe() // every kind; or name the kinds wanted
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	for e := range events {
		fmt.Printf("%s: job %d (%s), attempt %d of %d", e.Kind, e.JobID, e.JobKind, e.Attempt, e.MaxAttempts)
		if e.Kind == spool.EventJobFailed {
			fmt.Printf(": %s; next run in %s", e.Error, e.NextRunIn)
		}
		fmt.Println()
		if e.Kind == spool.EventJobCompleted {
			break
		}
	}
	// Output:
	// job_failed: job 1 (welcome_email), attempt 1 of 25: mail server busy; next run in 1ms
	// job_completed: job 1 (welcome_email), attempt 2 of 25
}
