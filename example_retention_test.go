package spool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExampleClient_JobsPrune keeps finished jobs as long as their state's
// retention says: here completed jobs are deleted as they complete
// (CompletedRetention negative), while a discarded job stays until pruned.
// See docs/retention.md.
func ExampleClient_JobsPrune() {
	ctx := context.Background()
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		if job.Args.To == "" {
			return spool.Discard(errors.New("no address"))
		}
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:            workers,
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}},
		CompletedRetention: -1,
		Logger:             quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	events, end := client.Subscribe(spool.EventJobCompleted, spool.EventJobDiscarded)
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	sent, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	bad, err := client.Insert(ctx, WelcomeEmail{}, nil)
	if err != nil {
		panic(err)
	}
	<-events
	<-events

	_, err = client.JobGet(ctx, sent.ID)
	fmt.Println("completed job kept:", !errors.Is(err, spool.ErrNotFound))
	job, err := client.JobGet(ctx, bad.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("discarded job kept:", job.State)

	time.Sleep(2 * time.Millisecond) // it is now more than a millisecond old
	n, err := client.JobsPrune(ctx, spool.PruneParams{
		States:    []spool.JobState{spool.JobStateDiscarded},
		OlderThan: time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("pruned:", n)
	_, err = client.JobGet(ctx, bad.ID)
	fmt.Println("discarded job kept:", !errors.Is(err, spool.ErrNotFound))
	// Output:
	// completed job kept: false
	// discarded job kept: discarded
	// pruned: 1
	// discarded job kept: false
}
