package spool_test

import (
	"context"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExampleClient_QueuePause pauses a queue: its jobs wait, other queues go on
// working, and a resume lets them run. The pause is stored, so every process
// working the queue holds it. See docs/queues.md.
func ExampleClient_QueuePause() {
	ctx := context.Background()
	sent := make(chan string)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		sent <- job.Args.To
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues: map[string]spool.QueueConfig{
			"mail":    {MaxWorkers: 1},
			"default": {MaxWorkers: 1},
		},
		Logger: quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if err := client.QueuePause(ctx, "mail"); err != nil {
		panic(err)
	}
	held, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, &spool.InsertOpts{Queue: "mail"})
	if err != nil {
		panic(err)
	}
	if _, err := client.Insert(ctx, WelcomeEmail{To: "bob@example.com"}, nil); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent) // the default queue works on

	job, err := client.JobGet(ctx, held.ID)
	if err != nil {
		panic(err)
	}
	paused, err := client.QueuesPaused(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("paused:", paused[0].Queue, "- its job is", job.State)

	if err := client.QueueResume(ctx, "mail"); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent)
	// Output:
	// sent to bob@example.com
	// paused: mail - its job is available
	// sent to ada@example.com
}
