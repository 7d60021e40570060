// Command readme is the Go program of the README, word for word (a test
// checks that the README shows this file): it sends three emails as jobs on
// an embedded SQLite file, one inserted alone, one in a transaction, one in
// bulk.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/sqlite"
)

// SendEmail is a job's args; Kind names its type in the database.
type SendEmail struct {
	To string `json:"to"`
}

// Kind implements spool.JobArgs.
func (SendEmail) Kind() string { return "send_email" }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sent := make(chan string, 3)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[SendEmail]) error {
		sent <- job.Args.To // a real handler sends the mail; an error retries with backoff
		return nil
	}))

	be, err := sqlite.Open(ctx, "sqlite://jobs.db") // or postgres.New(pool, nil), backend.Open(ctx, "postgres://…")
	if err != nil {
		log.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil { // or: spool migrate
		log.Fatal(err)
	}
	client, err := spool.NewClient(be, &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 50}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}

	// Alone, inside your own transaction, or in bulk (COPY for large batches).
	// Priority 0, the default, runs first and 100 last: this one waits
	// behind every priority-0 job of its queue.
	if _, err := client.Insert(ctx, SendEmail{To: "ada@example.com"}, &spool.InsertOpts{Priority: 10}); err != nil {
		log.Fatal(err)
	}
	err = be.WriteTx(ctx, func(tx *sql.Tx) error { // on PostgreSQL, a pgx.Tx of your own
		_, err := client.InsertTx(ctx, tx, SendEmail{To: "bob@example.com"}, nil)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.InsertMany(ctx, []spool.InsertManyParams{{Args: SendEmail{To: "cy@example.com"}}}); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		select {
		case to := <-sent:
			fmt.Println("sent to", to)
		case <-ctx.Done():
			log.Fatal("jobs not worked: ", ctx.Err())
		}
	}
	if err := client.Stop(ctx); err != nil { // soft: running jobs finish; StopAndCancel for a hard stop
		log.Fatal(err)
	}
}
