package spool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// Notify is the args of a job that sends one notification to a tenant's
// webhook.
type Notify struct {
	Tenant  string `json:"tenant"`
	Message string `json:"message"`
}

// Kind names the job type.
func (Notify) Kind() string { return "notify" }

// ExampleAddManyWorker registers a handler that receives many jobs per
// call, gathered by tenant, so that it can send each tenant's
// notifications in one request; each job still gets its own result (here
// one is discarded) and its own output. See docs/many.md.
func ExampleAddManyWorker() {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		calls []string
	)
	workers := spool.NewWorkers()
	spool.AddManyWorker(workers, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[Notify]) error {
		errs := spool.JobErrors{}
		sent := 0
		for _, j := range jobs {
			if j.Args.Message == "" {
				errs[j.ID] = spool.Discard(errors.New("empty message")) // this job alone
				continue
			}
			sent++
			// Each job's own context records its own output.
			if err := spool.RecordOutput(spool.JobContext(ctx, j), map[string]int{"batch_size": len(jobs)}); err != nil {
				errs[j.ID] = err
			}
		}
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s: %d jobs, %d sent", jobs[0].Args.Tenant, len(jobs), sent))
		mu.Unlock()
		return errs
	}), spool.ManyConfig[Notify]{
		MaxJobs: 50,
		MaxWait: 50 * time.Millisecond,
		GroupBy: func(n Notify) string { return n.Tenant },
	})
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 100}},
		Logger:  quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	var jobs []spool.InsertManyParams
	for i := range 4 {
		jobs = append(jobs, spool.InsertManyParams{Args: Notify{Tenant: "acme", Message: fmt.Sprint("hello ", i)}})
	}
	jobs = append(jobs,
		spool.InsertManyParams{Args: Notify{Tenant: "globex", Message: "hi"}},
		spool.InsertManyParams{Args: Notify{Tenant: "globex"}})
	res, err := client.InsertMany(ctx, jobs)
	if err != nil {
		panic(err)
	}
	finished, end := client.Subscribe(spool.EventJobCompleted, spool.EventJobDiscarded)
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	for range jobs {
		<-finished
	}

	slices.Sort(calls)
	fmt.Println(strings.Join(calls, "\n"))
	last, err := client.JobGet(ctx, res[5].ID)
	if err != nil {
		panic(err)
	}
	first, err := client.JobGet(ctx, res[0].ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", first.State, string(first.Output))
	fmt.Println("last:", last.State, last.Errors[0].Error)
	// Output:
	// acme: 4 jobs, 4 sent
	// globex: 2 jobs, 1 sent
	// first: completed {"batch_size":4}
	// last: discarded empty message
}
