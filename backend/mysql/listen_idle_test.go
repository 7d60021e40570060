package mysql_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestListenWakesAfterIdle: after a quiet spell, when Listen looks for new
// jobs less often, a job another process inserts still wakes its queue,
// and the next one too (the looks go back to their short interval).
func TestListenWakesAfterIdle(t *testing.T) {
	t.Parallel()
	name := testdb.NewMySQLDatabase(t)
	listener := openBackend(t, name, nil)
	if err := listener.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	inserter, err := spool.NewClient(openBackend(t, name, nil), &spool.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, wakes := make(chan struct{}), make(chan string, 16)
	go func() {
		_ = listener.Listen(ctx, func() { close(ready) }, func(w backend.Wake) {
			if w.Queue != "" {
				wakes <- w.Queue
			}
		})
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen not ready in 10 s")
	}
	// The bound below is 10 times the idle interval: generous for a loaded
	// machine, and short of where looks that kept slowing down past it
	// would be after 6 s (over a second apart).
	for i, quiet := range []time.Duration{6 * time.Second, 0} {
		time.Sleep(quiet) // past idleAfter the first time: the looks have slowed down
		queue := []string{"after_idle", "right_after"}[i]
		if _, err := inserter.Insert(context.Background(), noteArgs{}, &spool.InsertOpts{Queue: queue}); err != nil {
			t.Fatal(err)
		}
		select {
		case q := <-wakes:
			if q != queue {
				t.Fatalf("woke %q, want %q", q, queue)
			}
		case <-time.After(500 * time.Millisecond):
			t.Fatalf("no wake-up for queue %s within 500 ms", queue)
		}
	}
}

type noteArgs struct{}

func (noteArgs) Kind() string { return "listen_idle_note" }
