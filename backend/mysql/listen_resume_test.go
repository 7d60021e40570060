package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestListenHearsQuickResume: a queue paused and resumed by another process
// between two of a Listen's looks (the heads' figure of the paused queues
// is the same before and after) still wakes the queue in that Listen: the
// jobs inserted while it was paused found it paused when their wake-ups
// came, and nothing else would start them before the poll.
func TestListenHearsQuickResume(t *testing.T) {
	t.Parallel()
	name := testdb.NewMySQLDatabase(t)
	listener := openBackend(t, name, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := listener.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	admin := openBackend(t, name, nil)
	ready, wakes := make(chan struct{}), make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		done <- listener.Listen(ctx, func() { close(ready) }, func(w backend.Wake) {
			if w.Queue != "" {
				wakes <- w.Queue
			}
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Listen ended before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Listen not ready in 10 s")
	}
	// The looks are 5 to 100 ms apart and the pause and the resume a round
	// trip: without the resume's note most rounds go unheard.
	for i := range 5 {
		queue := "quick_resume_" + string(rune('a'+i))
		for _, paused := range []bool{true, false} {
			if err := admin.QueuePause(ctx, &backend.QueuePauseParams{Queue: queue, Paused: paused}); err != nil {
				t.Fatal(err)
			}
		}
		// An earlier round's queue may be woken twice: by its note and,
		// when a look fell between its pause and resume, by the figure.
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case q := <-wakes:
				if q == queue {
					break wait
				}
				if q < "quick_resume_a" || q >= queue {
					t.Fatalf("round %d: woke %q, want %q", i, q, queue)
				}
			case err := <-done:
				t.Fatalf("Listen ended: %v", err)
			case <-deadline:
				t.Fatalf("round %d: queue %s paused and resumed; no wake-up within 5 s", i, queue)
			}
		}
	}
	// A resume of a queue that was not paused tells nobody anything.
	if err := admin.QueuePause(ctx, &backend.QueuePauseParams{Queue: "never_paused"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := admin.DB().QueryRowContext(ctx, "SELECT count(*) FROM `"+name+"`.spool_wake_notes WHERE body LIKE 'resume:%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d resume notes, want 5 (one per resume of a paused queue)", n)
	}
}
