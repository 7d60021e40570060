package spool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// requestTenantKey carries a request's tenant in its context.
type requestTenantKey struct{}

// ExampleInsertMiddleware stamps the tenant of the request on every job
// inserted through the client, and refuses an insert made with no tenant:
// nothing is written then. See docs/events.md.
func ExampleInsertMiddleware() {
	ctx := context.Background()
	stampTenant := func(ctx context.Context, jobs []spool.InsertManyParams, next func(context.Context, []spool.InsertManyParams) error) error {
		tenant, ok := ctx.Value(requestTenantKey{}).(string)
		if !ok {
			return errors.New("insert outside a tenant's request")
		}
		meta, err := json.Marshal(map[string]string{"tenant": tenant})
		if err != nil {
			return err
		}
		for i := range jobs {
			o := spool.InsertOpts{}
			if jobs[i].InsertOpts != nil {
				o = *jobs[i].InsertOpts
			}
			o.Metadata = meta
			jobs[i].InsertOpts = &o
		}
		return next(ctx, jobs)
	}
	client, err := spool.NewClient(memory.New(), &spool.Config{
		InsertMiddleware: []spool.InsertMiddleware{stampTenant},
		Logger:           quietLogger(),
	})
	if err != nil {
		panic(err)
	}

	reqCtx := context.WithValue(ctx, requestTenantKey{}, "acme")
	res, err := client.Insert(reqCtx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	job, err := client.JobGet(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("metadata:", string(job.Metadata))

	_, err = client.Insert(ctx, WelcomeEmail{To: "bob@example.com"}, nil)
	fmt.Println("refused:", err)
	jobs, err := client.JobList(ctx, &spool.JobListParams{})
	if err != nil {
		panic(err)
	}
	fmt.Println("jobs stored:", len(jobs))
	// Output:
	// metadata: {"tenant":"acme"}
	// refused: insert outside a tenant's request
	// jobs stored: 1
}

// ExampleWorkMiddleware wraps every run of a handler: here it logs each
// run and its result, as a tracing or metrics middleware would measure it.
// What it returns is the run's result.
func ExampleWorkMiddleware() {
	ctx := context.Background()
	logRuns := func(ctx context.Context, job *spool.JobRow, next func(context.Context) error) error {
		fmt.Printf("start %s job %d, attempt %d\n", job.Kind, job.ID, job.Attempt)
		err := next(ctx)
		fmt.Printf("end %s job %d: %v\n", job.Kind, job.ID, err)
		return err
	}
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		fmt.Println("sending to", job.Args.To)
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:        workers,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		WorkMiddleware: []spool.WorkMiddleware{logRuns},
		Logger:         quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	done, end := client.Subscribe(spool.EventJobCompleted)
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// start welcome_email job 1, attempt 1
	// sending to ada@example.com
	// end welcome_email job 1: <nil>
}
