package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testdb"
)

// WelcomeEmail is the args of a job that sends a welcome mail.
type WelcomeEmail struct {
	To string `json:"to"`
}

// Kind names the job type; it is stored with every job.
func (WelcomeEmail) Kind() string { return "welcome_email" }

// Example enqueues a job inside a transaction and works it with a typed worker.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.PostgresURL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	schema := testdb.NewSchemaName() // your app would use the default, "spool"
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	be, err := postgres.New(pool, &postgres.Options{Schema: schema})
	if err != nil {
		panic(err)
	}
	if err := be.Migrate(ctx); err != nil {
		panic(err)
	}

	sent := make(chan string)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[WelcomeEmail]) error {
		sent <- job.Args.To
		return nil
	}))
	client, err := spool.NewClient(be, &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10}},
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	// The job and the user row commit together, or neither does.
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	res, err := client.InsertTx(ctx, tx, WelcomeEmail{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent)

	// Bad input is refused with a typed error and writes nothing.
	_, err = client.Insert(ctx, WelcomeEmail{}, &spool.InsertOpts{Queue: "no spaces"})
	var invalid *spool.InvalidJobError
	fmt.Println("rejected:", errors.As(err, &invalid), invalid.Field)

	// The outcome is written in the next completion batch, a moment later.
	job, err := client.JobGet(ctx, res.ID)
	for err == nil && job.State != spool.JobStateCompleted {
		time.Sleep(time.Millisecond)
		job, err = client.JobGet(ctx, res.ID)
	}
	fmt.Println("state:", job.State, "attempt:", job.Attempt)
	// Output:
	// sent to ada@example.com
	// rejected: true queue
	// state: completed attempt: 1
}
