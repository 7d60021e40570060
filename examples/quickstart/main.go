// Command quickstart is Spool's main job in miniature: it migrates the
// database, enqueues jobs (one at a time, a batch in bulk, one delayed,
// one that fails and retries), works them with typed workers, and prints what
// happened. The database comes from $SPOOL_DATABASE_URL (sqlite://PATH,
// postgres://…, mysql://…), else the embedded SQLite file ./spool.db, which
// the spool CLI uses by default too: nothing to install or set up, and the
// jobs stay there to look at with `spool jobs list` and `spool ui`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	_ "github.com/spoolq/spool/backend/mysql"
	_ "github.com/spoolq/spool/backend/postgres"
	_ "github.com/spoolq/spool/backend/sqlite"
)

// SendEmail is a job's args: its Kind names the job type in the database.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Kind implements spool.JobArgs.
func (SendEmail) Kind() string { return "send_email" }

// ResizeImage is a second job type.
type ResizeImage struct {
	Path  string `json:"path"`
	Width int    `json:"width"`
}

// Kind implements spool.JobArgs.
func (ResizeImage) Kind() string { return "resize_image" }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := os.Getenv("SPOOL_DATABASE_URL")
	cliFlag := " --database-url '" + dsn + "'"
	if dsn == "" {
		dsn, cliFlag = "sqlite://spool.db", ""
		fmt.Println("database: ./spool.db (embedded SQLite; it is kept: delete it to start afresh)")
	} else {
		fmt.Printf("database: %s\n", dsn)
	}
	be, err := backend.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		return err
	}

	var done atomic.Int32
	const total = 1 + 100 + 1 + 1
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[SendEmail]) error {
		if job.Args.To == "flaky@example.com" && job.Attempt < 3 {
			err := errors.New("smtp: 421 try again later")
			fmt.Printf("  job %d: email to %s (%q), attempt %d failed: %v (it will be retried)\n",
				job.ID, job.Args.To, job.Args.Subject, job.Attempt, err)
			return err
		}
		fmt.Printf("  job %d: email to %s (%q), attempt %d\n", job.ID, job.Args.To, job.Args.Subject, job.Attempt)
		done.Add(1)
		return nil
	}))
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[ResizeImage]) error {
		done.Add(1)
		return nil
	}))

	client, err := spool.NewClient(be, &spool.Config{
		Workers:     workers,
		Queues:      map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 20}},
		RetryPolicy: spool.ConstantRetryPolicy{Delay: 200 * time.Millisecond},
		// Failures are logged at Warn, discards at Error (docs/logging.md);
		// the handler above prints its own failures, so only worse is shown.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	res, err := client.Insert(ctx, SendEmail{To: "ada@example.com", Subject: "Welcome"}, nil)
	if err != nil {
		return err
	}
	fmt.Printf("inserted job %d\n", res.ID)
	if _, err := client.Insert(ctx, SendEmail{To: "flaky@example.com", Subject: "Retries"}, nil); err != nil {
		return err
	}
	if _, err := client.Insert(ctx, SendEmail{To: "later@example.com", Subject: "Delayed 1s"},
		&spool.InsertOpts{Delay: time.Second}); err != nil {
		return err
	}
	batch := make([]spool.InsertManyParams, 100)
	for i := range batch {
		batch[i] = spool.InsertManyParams{Args: ResizeImage{Path: fmt.Sprintf("img/%03d.png", i), Width: 640}}
	}
	if _, err := client.InsertMany(ctx, batch); err != nil {
		return err
	}
	fmt.Println("inserted 100 resize_image jobs in one statement")
	if _, err := client.Insert(ctx, SendEmail{}, &spool.InsertOpts{Priority: -1}); err != nil {
		fmt.Printf("rejected as expected: %v\n", err)
	}

	start := time.Now()
	for done.Load() < total {
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d jobs done: %w", done.Load(), total, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := client.Stop(ctx); err != nil {
		return err
	}
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("all %d jobs worked in %s\n", total, time.Since(start).Round(time.Millisecond))
	fmt.Println("the database now holds:")
	for _, q := range stats {
		fmt.Printf("  queue %s: %s\n", q.Queue, countsText(q.Counts))
	}
	fmt.Println("next, look at them:")
	fmt.Printf("  go run ./cmd/spool%s jobs list --state completed\n", cliFlag)
	fmt.Printf("  go run ./cmd/spool%s jobs show %d\n", cliFlag, res.ID)
	fmt.Printf("  go run ./cmd/spool%s ui\n", cliFlag)
	return nil
}

// countsText writes job counts by state in the order a job passes through
// them: "available 3, completed 100".
func countsText(counts map[backend.State]int64) string {
	var parts []string
	for _, s := range backend.AllStates {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return "no jobs"
	}
	return strings.Join(parts, ", ")
}
