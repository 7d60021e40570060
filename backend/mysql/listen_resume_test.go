package mysql_test

import (
	"context"
	"testing"

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
	wakes := listenWakes(t, ctx, listener)
	// The looks are 5 to 100 ms apart and the pause and the resume a round
	// trip: without the resume's note most rounds go unheard.
	for i := range 5 {
		queue := "quick_resume_" + string(rune('a'+i))
		for _, paused := range []bool{true, false} {
			if err := admin.QueuePause(ctx, &backend.QueuePauseParams{Queue: queue, Paused: paused}); err != nil {
				t.Fatal(err)
			}
		}
		awaitWake(t, wakes, queue, "paused and resumed")
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
