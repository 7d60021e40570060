package spool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// retryDeadlines wraps a store and keeps the deadline of the context of
// every finish that records a retry.
type retryDeadlines struct {
	backend.Backend
	mu        sync.Mutex
	deadlines []time.Time
}

func (r *retryDeadlines) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	for _, f := range p.Finishes {
		if f.Outcome == backend.OutcomeRetry {
			dl, _ := ctx.Deadline()
			r.mu.Lock()
			r.deadlines = append(r.deadlines, dl)
			r.mu.Unlock()
			break
		}
	}
	return r.Backend.JobFinishMany(ctx, p)
}

// TestStopGiveUpWithinItsGrace: a stop whose deadline passes while a handler
// ignores its context records that job's retry within the half second
// after the deadline that Stop promises (docs/guarantees.md, promise 7),
// counted from the deadline itself: the write's context ends by then. It
// once had half a second of its own after the handlers' half second, so a
// slow store made Stop return a second after its deadline (lab chaos saw
// 1.08 s on a loaded PostgreSQL).
func TestStopGiveUpWithinItsGrace(t *testing.T) {
	ctx := context.Background()
	store := &retryDeadlines{Backend: memory.New()}
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		close(started)
		<-release // ignores its context
		return nil
	}))
	client, err := spool.NewClient(store, &spool.Config{
		Workers: ws,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger:  quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	<-started
	deadline := time.Now().Add(20 * time.Millisecond)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var stuck *spool.StopTimeoutError
	if err := client.Stop(sctx); !errors.As(err, &stuck) {
		t.Fatalf("stop: %v, want a *StopTimeoutError", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.deadlines) != 1 {
		t.Fatalf("%d retries recorded, want 1", len(store.deadlines))
	}
	if limit := deadline.Add(500 * time.Millisecond); store.deadlines[0].IsZero() || store.deadlines[0].After(limit) {
		t.Fatalf("the retry's write may run until %s, past the stop's deadline plus half a second (%s)",
			store.deadlines[0].Format("15:04:05.000"), limit.Format("15:04:05.000"))
	}
}
