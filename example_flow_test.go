package spool_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExportData is the args of a job that calls a partner's slow API for one
// customer.
type ExportData struct {
	Customer string `json:"customer"`
}

// Kind names the job type.
func (ExportData) Kind() string { return "export_data" }

// FlowKey puts each customer's jobs under a flow key of their own.
func (e ExportData) FlowKey() string { return e.Customer }

// heldBack watches a queue's claims: it closes its channel at the first
// claim that takes nothing while at least two of the queue's jobs run.
type heldBack struct {
	spool.NopObserver
	mu      *sync.Mutex
	running *int
	seen    func()
}

// ClaimDone implements spool.Observer.
func (h heldBack) ClaimDone(queue string, jobs int, took time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if jobs == 0 && err == nil && *h.running >= 2 {
		h.seen()
	}
}

// ExampleFlow limits a queue to 2 jobs running at once across every
// process working it, however many workers each has: the partner's API
// takes no more. The handlers here hold until a claim found the queue at
// its limit (an Observer watches the claims), then 6 jobs run, never more
// than 2 at once. See docs/flow.md.
func ExampleFlow() {
	ctx := context.Background()
	var mu sync.Mutex
	running, most := 0, 0
	limitHeld := make(chan struct{})
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[ExportData]) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-limitHeld
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues: map[string]spool.QueueConfig{
			"exports": {MaxWorkers: 10, Flow: &spool.Flow{GlobalLimit: 2}},
		},
		Observers: []spool.Observer{heldBack{mu: &mu, running: &running, seen: sync.OnceFunc(func() { close(limitHeld) })}},
		Logger:    quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	done, end := client.Subscribe(spool.EventJobCompleted)
	defer end()
	for _, customer := range []string{"acme", "acme", "acme", "globex", "globex", "initech"} {
		if _, err := client.Insert(ctx, ExportData{Customer: customer}, &spool.InsertOpts{Queue: "exports"}); err != nil {
			panic(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	for range 6 {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("jobs run: 6, most at once:", most)
	// Output:
	// jobs run: 6, most at once: 2
}

// ExampleFlow_fairShare shares a queue among flow keys: a customer with a
// large backlog does not hold up another's jobs, which take turns with it
// instead of waiting behind it. The queue runs one job at a time, so the
// order of runs shows the sharing. See docs/flow.md.
func ExampleFlow_fairShare() {
	ctx := context.Background()
	var order []string
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[ExportData]) error {
		order = append(order, job.Args.Customer) // one job at a time: no lock needed
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues: map[string]spool.QueueConfig{
			"exports": {MaxWorkers: 1, Prefetch: -1, Flow: &spool.Flow{FairShare: true}},
		},
		Logger: quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	done, end := client.Subscribe(spool.EventJobCompleted)
	defer end()

	// acme's backlog is inserted first, globex's two jobs after it.
	for _, customer := range []string{"acme", "acme", "acme", "acme", "acme", "globex", "globex"} {
		if _, err := client.Insert(ctx, ExportData{Customer: customer}, &spool.InsertOpts{Queue: "exports"}); err != nil {
			panic(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	for range 7 {
		<-done
	}
	fmt.Println(strings.Join(order, " "))
	// Output:
	// acme globex acme globex acme acme acme
}
