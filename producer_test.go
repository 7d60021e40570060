package spool_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

type wakeArgs struct{}

func (wakeArgs) Kind() string { return "wake_test" }

// gatedBackend holds the first claim after it ran until the test releases
// it, and reports every wake-up once the client has taken it.
type gatedBackend struct {
	*sqlite.Backend
	gate    atomic.Bool
	claimed chan struct{}
	release chan struct{}
	woke    chan struct{}
}

func (g *gatedBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := g.Backend.JobClaim(ctx, p)
	if g.gate.CompareAndSwap(true, false) {
		g.claimed <- struct{}{}
		<-g.release
	}
	return rows, err
}

func (g *gatedBackend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return g.Backend.Listen(ctx, ready, func(w backend.Wake) {
		onWake(w)
		select {
		case g.woke <- struct{}{}:
		default:
		}
	})
}

// TestWakeDuringClaimIsKept: a wake-up that arrives while a claim is in
// flight must survive that claim coming back short, since the claim may
// have looked before the job that caused the wake-up was committed. With
// polling an hour apart, a lost wake-up leaves the job waiting.
func TestWakeDuringClaimIsKept(t *testing.T) {
	ctx := context.Background()
	inner, err := sqlite.OpenPath(ctx, filepath.Join(t.TempDir(), "wake.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	if err := inner.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	be := &gatedBackend{Backend: inner, claimed: make(chan struct{}), release: make(chan struct{}), woke: make(chan struct{}, 1)}
	be.gate.Store(true)
	ran := make(chan struct{}, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[wakeArgs]) error {
		ran <- struct{}{}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1, Prefetch: -1}},
		PollInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	<-be.claimed // the first claim found nothing and is held in flight
	// Drain a wake-up from start-up, if any, so the next one is the insert's.
	select {
	case <-be.woke:
	default:
	}
	if _, err := c.Insert(ctx, wakeArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	<-be.woke // the producer, parked waiting for the claim, has taken it
	close(be.release)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job waited for a poll: the wake-up during the claim was lost")
	}
}
