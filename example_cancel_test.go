package spool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExampleClient_JobCancel cancels a job that waits for its time and one that
// is running: the running handler's context is cancelled with the cause
// ErrLeaseLost, and what the handler returns then is not written. A job
// that finished cannot be cancelled.
func ExampleClient_JobCancel() {
	ctx := context.Background()
	started := make(chan struct{})
	causes := make(chan error, 1)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		close(started)
		<-ctx.Done() // a long job watches its context
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger:  quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	later, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, &spool.InsertOpts{Delay: time.Hour})
	if err != nil {
		panic(err)
	}
	job, err := client.JobCancel(ctx, later.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("scheduled job:", job.State)

	now, err := client.Insert(ctx, WelcomeEmail{To: "bob@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	<-started
	if job, err = client.JobCancel(ctx, now.ID); err != nil {
		panic(err)
	}
	fmt.Println("running job:", job.State)
	fmt.Println("handler's context cancelled, lease lost:", errors.Is(<-causes, spool.ErrLeaseLost))

	_, err = client.JobCancel(ctx, now.ID)
	fmt.Println("cancel again refused:", errors.Is(err, spool.ErrInvalidState))
	// Output:
	// scheduled job: cancelled
	// running job: cancelled
	// handler's context cancelled, lease lost: true
	// cancel again refused: true
}
