package spool_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

type demandArgs struct{}

func (demandArgs) Kind() string { return "demand_test" }

// demandBackend is a memory store that keeps the functions a client
// registers as backend.WakeDemand.
type demandBackend struct {
	*memory.Backend
	mu    sync.Mutex
	funcs map[int]func() bool
	next  int
}

func (d *demandBackend) AddWakeDemand(waiting func() bool) (remove func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := d.next
	d.next++
	d.funcs[id] = waiting
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.funcs, id)
	}
}

// waiting reports what the registered functions report, and how many
// there are.
func (d *demandBackend) waiting() (bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.funcs {
		if f() {
			return true, len(d.funcs)
		}
	}
	return false, len(d.funcs)
}

var _ backend.WakeDemand = (*demandBackend)(nil)

// TestWakeDemand: a client reports a worker waiting for a job while a
// queue has an idle worker, and none while every worker is busy; it stops
// reporting at its stop.
func TestWakeDemand(t *testing.T) {
	ctx := context.Background()
	be := &demandBackend{Backend: migratedMemory(t), funcs: map[int]func() bool{}}
	started := make(chan struct{}, 2)
	hold := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[demandArgs]) error {
		started <- struct{}{}
		<-hold
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2, Prefetch: -1}},
		PollInterval: time.Hour,
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var holdOnce sync.Once
	defer holdOnce.Do(func() { close(hold) })
	// awaitWaiting waits until the client reports want: the producer
	// updates its state on its own goroutine after each event.
	awaitWaiting := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, n := be.waiting()
			if n != 1 {
				t.Fatalf("%d functions registered, want 1", n)
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the client reports a worker waiting %v, want %v", what, got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	awaitWaiting(true, "idle after its start")
	for range 2 {
		if _, err := c.Insert(ctx, demandArgs{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started
	awaitWaiting(false, "both workers busy")
	holdOnce.Do(func() { close(hold) })
	awaitWaiting(true, "the jobs finished and the next claim came back empty")
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, n := be.waiting(); n != 0 {
		t.Fatalf("%d functions still registered after the stop, want 0", n)
	}
}
