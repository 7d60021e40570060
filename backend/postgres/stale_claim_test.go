package postgres_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
)

// heldClaimBackend holds in flight, once it has run, the first claim after
// gate is set, until release is closed.
type heldClaimBackend struct {
	*postgres.Backend
	gate    atomic.Bool
	claimed chan struct{}
	release chan struct{}
}

func (h *heldClaimBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	if h.gate.CompareAndSwap(true, false) {
		h.claimed <- struct{}{}
		<-h.release
	}
	return rows, err
}

// pauseArgs is the payload of TestResumeWithClaimInFlight.
type pauseArgs struct {
	N     int  `json:"n"`
	Block bool `json:"block"`
}

func (pauseArgs) Kind() string { return "pause_test" }

// TestResumeWithClaimInFlight is the conformance test PauseRunningClient
// (lease rows, no claim lock, no wake routing) with the claim that found
// the queue paused, sent while the blocking job ran, held in flight across
// the resume, as a claim slowed by load can be: the jobs that waited for
// the resume all run, though the client polls once a minute. A second
// claim, for the one slot the held one left unasked, takes the first; the
// held claim's empty reply, arriving after, cleared the producer's more
// and left the second job available with attempt 0 (the failure seen once
// in CI).
func TestResumeWithClaimInFlight(t *testing.T) {
	ctx := context.Background()
	h := harnessWith(postgres.Options{Claims: postgres.ClaimsLeaseRows, ClaimLock: postgres.ClaimLockOff, WakeRouting: postgres.WakeRoutingOff})
	inner := h.NewBackend(t)
	be := &heldClaimBackend{Backend: inner.(*postgres.Backend), claimed: make(chan struct{}), release: make(chan struct{})}
	admin, err := spool.NewClient(h.Reopen(t, inner), &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 16)
	block := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[pauseArgs]) error {
		started <- j.Args.N
		if j.Args.Block {
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4}},
		LeaseDuration:  3 * time.Second,
		PollInterval:   time.Minute,
		RescueInterval: 50 * time.Millisecond,
		Logger:         conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var releaseOnce, blockOnce sync.Once
	// Cleanups run last first: the held claim and the blocking handler go
	// before the stop, which waits for them.
	t.Cleanup(func() { _ = c.Stop(ctx) })
	t.Cleanup(func() { blockOnce.Do(func() { close(block) }) })
	t.Cleanup(func() { releaseOnce.Do(func() { close(be.release) }) })
	recvN := func(what string) int {
		t.Helper()
		select {
		case n := <-started:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
			return 0
		}
	}
	var ids []int64
	insert := func(args pauseArgs) {
		t.Helper()
		r, err := admin.Insert(ctx, args, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	insert(pauseArgs{N: -1, Block: true})
	if n := recvN("the blocking job to start"); n != -1 {
		t.Fatalf("job %d started, want the blocking one", n)
	}
	if err := admin.QueuePause(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	be.gate.Store(true)
	insert(pauseArgs{N: 0})
	<-be.claimed // a claim that found the queue paused, held in flight
	insert(pauseArgs{N: 1})
	insert(pauseArgs{N: 2})
	blockOnce.Do(func() { close(block) })
	if err := admin.QueueResume(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	if n := recvN("a waiting job to start after the resume"); n != 0 {
		t.Fatalf("job %d started first, want job 0", n)
	}
	releaseOnce.Do(func() { close(be.release) })
	// Jobs 1 and 2 run on two workers: in either order.
	seen := map[int]bool{}
	for len(seen) < 2 {
		select {
		case n := <-started:
			if n != 1 && n != 2 || seen[n] {
				t.Fatalf("job %d started, want jobs 1 and 2 once each", n)
			}
			seen[n] = true
		case <-time.After(10 * time.Second):
			for _, id := range ids[1:] {
				j, err := inner.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("job %d: %s, attempt %d", id, j.State, j.Attempt)
			}
			t.Fatalf("of jobs 1 and 2 only %v started within 10 s of the held claim's reply: its empty reply cleared the producer's more", seen)
		}
	}
}
