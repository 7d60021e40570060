package spool_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// turnBackend makes a memory store's claims wait their turn, as MariaDB's
// claim lock does: the claim it gates waits until the test opens the
// gate, then asks for the room its caller made meanwhile (More) and takes
// that many jobs beyond its ask.
type turnBackend struct {
	*memory.Backend
	claims  atomic.Int64
	waiting chan int // the gated claim's ask
	open    chan struct{}
	took    chan int // the gated claim's jobs
}

// JobClaim gates the second claim.
func (b *turnBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	gated := b.claims.Add(1) == 2
	if gated {
		b.waiting <- p.Max
		<-b.open
	}
	q := *p
	if p.More != nil {
		q.Max += p.More()
	}
	rows, err := b.Backend.JobClaim(ctx, &q)
	if gated {
		b.took <- len(rows)
	}
	return rows, err
}

// TestClaimTakesTheRoomMadeWhileItWaited: a claim that waits its turn in
// the store takes, when the turn comes, the room its process made while
// it waited, beyond what it asked for when sent, and never more than the
// queue's workers and prefetch can hold.
func TestClaimTakesTheRoomMadeWhileItWaited(t *testing.T) {
	ctx := context.Background()
	be := &turnBackend{Backend: migratedMemory(t), waiting: make(chan int, 1), open: make(chan struct{}), took: make(chan int, 1)}
	const workers, prefetch = 2, 2
	const jobs = 20
	c, tokens, done := startTokenClient(t, be, workers, prefetch, jobs)
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.Stop(stopCtx); err != nil {
			t.Error(err)
		}
	}()
	// The first claim fills both workers and the prefetch. One job
	// finishes: the buffer is down to one, and the next claim, for the
	// room left, waits its turn.
	tokens <- struct{}{}
	asked := <-be.waiting
	// While it waits, every job the first claim took finishes.
	for range workers + prefetch - 1 {
		tokens <- struct{}{}
	}
	for range workers + prefetch {
		<-done
	}
	close(be.open)
	for range jobs - workers - prefetch {
		tokens <- struct{}{}
	}
	took := <-be.took
	if took <= asked || took > workers+prefetch {
		t.Fatalf("a claim that asked for %d when sent took %d when its turn came; want more than %d, at most %d",
			asked, took, asked, workers+prefetch)
	}
}

// grownThenHeld makes a memory store's second claim wait its turn, then
// take the room its caller made meanwhile (More) and hold, as a claim
// whose commit never comes back would.
type grownThenHeld struct {
	*memory.Backend
	claims  atomic.Int64
	waiting chan int // the held claim's ask when sent
	open    chan struct{}
	grown   chan int // what More gave it
	release chan struct{}
}

// JobClaim gates and then holds the second claim.
func (b *grownThenHeld) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if b.claims.Add(1) != 2 {
		return b.Backend.JobClaim(ctx, p)
	}
	b.waiting <- p.Max
	<-b.open
	n := 0
	if p.More != nil {
		n = p.More()
	}
	b.grown <- n
	<-b.release
	return nil, ctx.Err()
}

// TestStopNamesAGrownClaimWhole: a stop that gives up on a claim in flight
// which took on, in its turn, the room its process made while it waited
// names the claim with all it may hold, not only what it asked for when
// sent.
func TestStopNamesAGrownClaimWhole(t *testing.T) {
	ctx := context.Background()
	be := &grownThenHeld{Backend: migratedMemory(t), waiting: make(chan int, 1), open: make(chan struct{}),
		grown: make(chan int, 1), release: make(chan struct{})}
	defer close(be.release)
	const workers, prefetch = 2, 2
	c, tokens, done := startTokenClient(t, be, workers, prefetch, 20)
	// The first claim fills both workers and the prefetch; one job
	// finishing sends the second claim, which waits its turn while the
	// rest finish, then takes on the room they made.
	tokens <- struct{}{}
	asked := <-be.waiting
	for range workers + prefetch - 1 {
		tokens <- struct{}{}
	}
	for range workers + prefetch {
		<-done
	}
	close(be.open)
	grown := <-be.grown
	if grown <= 0 {
		t.Fatalf("the held claim took on %d jobs in its turn; want some", grown)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := c.Stop(sctx)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError", err, err)
	}
	if len(se.Claims) != 1 || !se.Claims[0].InFlight || se.Claims[0].Max != asked+grown {
		t.Fatalf("stop named claims %+v; want the one in flight, up to %d+%d jobs", se.Claims, asked, grown)
	}
}

// startTokenClient starts a client of one queue (workers, prefetch) on be
// with jobs inserted, each of whose handlers finishes once given a token;
// done receives once per finished job.
func startTokenClient(t *testing.T, be backend.Backend, workers, prefetch, jobs int) (c *spool.Client, tokens, done chan struct{}) {
	t.Helper()
	ctx := context.Background()
	tokens, done = make(chan struct{}, jobs), make(chan struct{}, jobs)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, _ *spool.Job[wakeArgs]) error {
		select {
		case <-tokens:
		case <-ctx.Done():
			return ctx.Err()
		}
		done <- struct{}{}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers: ws,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: workers, Prefetch: prefetch}},
		Logger:  conformance.TestLogger(t, slog.LevelError),
	})
	if err != nil {
		t.Fatal(err)
	}
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
	return c, tokens, done
}
