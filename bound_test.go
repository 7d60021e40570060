package spool_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// stalledBackend holds every outcome write until release is closed, and
// counts the jobs claimed.
type stalledBackend struct {
	*memory.Backend
	claimed atomic.Int64
	release chan struct{}
}

func (s *stalledBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := s.Backend.JobClaim(ctx, p)
	s.claimed.Add(int64(len(rows)))
	return rows, err
}

func (s *stalledBackend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Backend.JobFinishMany(ctx, p)
}

// While outcome writes stall (the database slow or away), a process stops
// claiming at a bound: its workers and prefetch, the outcomes queued for
// writing (4 × CompletionBatchMax) and the batch being written. A worker
// whose outcome cannot be queued keeps its slot, so claims stop rather than
// leasing jobs nobody can finish.
func TestClaimedButUnfinishedIsBounded(t *testing.T) {
	ctx := context.Background()
	inner := migratedMemory(t)
	be := &stalledBackend{Backend: inner, release: make(chan struct{})}
	var calls atomic.Int64
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[wakeArgs]) error {
		calls.Add(1)
		return nil
	}))
	const workers, prefetch, batch = 3, 2, 1
	c, err := spool.NewClient(be, &spool.Config{
		Workers:            ws,
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: workers, Prefetch: prefetch}},
		CompletionBatchMax: batch,
		PollInterval:       10 * time.Millisecond,
		Logger:             conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 100
	params := make([]spool.InsertManyParams, jobs)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: wakeArgs{}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Stuck: one outcome being written, 4 queued, a worker blocked on each
	// slot with its outcome in hand, and the prefetch buffer full.
	const handled = batch + 4*batch + workers
	const bound = handled + prefetch
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() != handled || be.claimed.Load() != bound {
		if time.Now().After(deadline) || calls.Load() > handled || be.claimed.Load() > bound {
			t.Fatalf("with outcome writes stalled: %d jobs claimed and %d handled; want the claims to stop at %d, %d handled",
				be.claimed.Load(), calls.Load(), bound, handled)
		}
		time.Sleep(time.Millisecond)
	}
	close(be.release)
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for calls.Load() < jobs {
		if stopCtx.Err() != nil {
			t.Fatalf("after the writes resumed only %d of %d jobs ran", calls.Load(), jobs)
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if n := be.claimed.Load(); n != jobs {
		t.Fatalf("%d claims for %d jobs", n, jobs)
	}
}
