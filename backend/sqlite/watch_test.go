package sqlite_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
)

// TestOtherProcessInsertWakes: a job inserted through another connection
// (as another process would) starts without waiting for a poll, which is an
// hour apart here: the store's watcher sees the other commit.
func TestOtherProcessInsertWakes(t *testing.T) {
	ctx := context.Background()
	worker := newBackend(t, nil)
	other := reopen(t, worker)
	ran := make(chan int, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[noteArgs]) error {
		ran <- j.Args.N
		return nil
	}))
	c, err := spool.NewClient(worker, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, PollInterval: time.Hour,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	// A first job, from this process, settles the producer: it has claimed,
	// come back short, and waits for a wake-up.
	if _, err := c.Insert(ctx, noteArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if n := <-ran; n != 1 {
		t.Fatalf("ran %d", n)
	}
	inserter, err := spool.NewClient(other, &spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(ctx, noteArgs{N: 5}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-ran:
		if n != 5 {
			t.Fatalf("ran %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a job inserted by another connection waited for the poll")
	}
}
