package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// WelcomeEmail is the args of a job that sends a welcome mail.
type WelcomeEmail struct {
	To string `json:"to"`
}

// Kind names the job type; it is stored with every job.
func (WelcomeEmail) Kind() string { return "welcome_email" }

// quietLogger keeps the examples' output to what they print: it drops the
// logs, which for the failures some examples cause on purpose are warnings
// and errors.
func quietLogger() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}

// waitFor polls job id until it reaches state: outcomes are written in the
// next completion batch, a moment after the handler returns.
func waitFor(ctx context.Context, client *spool.Client, id int64, state spool.JobState) *spool.JobRow {
	for {
		job, err := client.JobGet(ctx, id)
		if err != nil {
			panic(err)
		}
		if job.State == state {
			return job
		}
		time.Sleep(time.Millisecond)
	}
}

// Example inserts a job and works it with a typed worker. The memory backend
// keeps jobs in the process; a program would open PostgreSQL, SQLite or
// MySQL the same way (postgres.New, sqlite.Open, mysql.Open) and run
// Migrate once.
func Example() {
	ctx := context.Background()
	be := memory.New()

	sent := make(chan string)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		sent <- job.Args.To
		return nil
	}))
	client, err := spool.NewClient(be, &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10}},
		Logger:  quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	res, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent)

	// Bad input is refused with a typed error and writes nothing.
	_, err = client.Insert(ctx, WelcomeEmail{}, &spool.InsertOpts{Queue: "no spaces"})
	var invalid *spool.InvalidJobError
	fmt.Println("rejected:", errors.As(err, &invalid), invalid.Field)

	job := waitFor(ctx, client, res.ID, spool.JobStateCompleted)
	fmt.Println("state:", job.State, "attempt:", job.Attempt)
	// Output:
	// sent to ada@example.com
	// rejected: true queue
	// state: completed attempt: 1
}

// ExampleClient_InsertTx enqueues a job in the application's transaction:
// it exists, and runs, only if the transaction commits. With PostgreSQL the
// transaction is a pgx.Tx, with SQLite and MySQL a *sql.Tx.
func ExampleClient_InsertTx() {
	ctx := context.Background()
	be := memory.New()
	client, err := spool.NewClient(be, &spool.Config{Logger: quietLogger()})
	if err != nil {
		panic(err)
	}

	tx := be.Begin()
	kept, err := client.InsertTx(ctx, tx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	tx = be.Begin()
	dropped, err := client.InsertTx(ctx, tx, WelcomeEmail{To: "bob@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		panic(err)
	}

	_, err = client.JobGet(ctx, kept.ID)
	fmt.Println("committed job stored:", err == nil)
	_, err = client.JobGet(ctx, dropped.ID)
	fmt.Println("rolled-back job stored:", !errors.Is(err, spool.ErrNotFound))
	// Output:
	// committed job stored: true
	// rolled-back job stored: false
}

// quickRetries retries after a millisecond, for the example; the default
// policy waits attempt⁴ seconds.
type quickRetries struct{}

func (quickRetries) NextRetry(int) time.Duration { return time.Millisecond }

// Example_retryAndSnooze shows a handler's outcomes: an error is retried
// with backoff, spool.Snooze puts the job back without using an attempt,
// and a nil error completes it.
func Example_retryAndSnooze() {
	ctx := context.Background()
	runs := 0
	done := make(chan struct{})
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		runs++
		switch runs {
		case 1:
			return errors.New("mail server busy") // retried after a backoff
		case 2:
			return spool.Snooze(time.Millisecond) // again soon, attempt given back
		}
		close(done)
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
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	res, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	<-done
	job := waitFor(ctx, client, res.ID, spool.JobStateCompleted)
	fmt.Println("runs:", runs, "attempt:", job.Attempt, "errors recorded:", len(job.Errors))
	fmt.Println("first error:", job.Errors[0].Error)
	// Output:
	// runs: 3 attempt: 2 errors recorded: 1
	// first error: mail server busy
}

// ExampleClient_Stop stops a client gracefully: no new jobs start, running
// handlers finish, and Stop returns by its context's deadline even if one
// ignores its context (the error then names the jobs still running).
func ExampleClient_Stop() {
	ctx := context.Background()
	started := make(chan struct{})
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		close(started)
		time.Sleep(20 * time.Millisecond) // a short job: it finishes during the stop
		return nil
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
	res, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	<-started

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("stop:", client.Stop(stopCtx))
	job, err := client.JobGet(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("state:", job.State)
	// Output:
	// stop: <nil>
	// state: completed
}
