package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testLocalWake: with polling an hour apart, a delayed job inserted by this
// client and a retry it wrote must still run when due: the client wakes its
// own producer for due times it knows.
func testLocalWake(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan NoteArgs, 4)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, delayWorker{
		Worker: spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
			ran <- j.Args
			if j.Args.Mode == "fail-once" && j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}),
		delay: 200 * time.Millisecond,
	})
	cfg := fastConfig(ws, 2)
	cfg.PollInterval = time.Hour
	c := newClient(t, be, cfg)
	start(t, c)
	delayed := insert(t, c, NoteArgs{N: 1}, &spool.InsertOpts{Delay: 200 * time.Millisecond})
	if a := recv(t, ran, "delayed job"); a.N != 1 {
		t.Fatalf("ran %+v", a)
	}
	waitState(t, be, delayed, backend.StateCompleted)
	retried := insert(t, c, NoteArgs{N: 2, Mode: "fail-once"}, nil)
	recv(t, ran, "first attempt")
	recv(t, ran, "retry after 200ms")
	if j := waitState(t, be, retried, backend.StateCompleted); j.Attempt != 2 {
		t.Fatalf("retried job: %+v", j)
	}
	// A later due time known first, then an earlier one: both must fire.
	later := insert(t, c, NoteArgs{N: 3}, &spool.InsertOpts{Delay: 700 * time.Millisecond})
	insert(t, c, NoteArgs{N: 4, Mode: "fail-once"}, nil)
	seen := map[int]int{}
	for len(seen) < 2 || seen[4] < 2 {
		seen[recv(t, ran, "the later delayed job and the earlier retry").N]++
	}
	waitState(t, be, later, backend.StateCompleted)
}

// testCrossProcessWake: a job inserted through another handle on the store
// (another process) runs at once in a client that polls only hourly: the
// backend's notifier wakes it (LISTEN/NOTIFY on PostgreSQL, the data
// version watch on SQLite, the new-jobs read on MySQL).
func testCrossProcessWake(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	if _, ok := be.(backend.Notifier); !ok {
		t.Fatalf("backend %s is not a backend.Notifier: other processes' jobs would wait for a poll", be.Name())
	}
	ran := make(chan NoteArgs, 4)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- j.Args
		return nil
	}))
	cfg := fastConfig(ws, 2)
	cfg.PollInterval = time.Hour
	worker := newClient(t, be, cfg)
	start(t, worker)
	other := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	for n := range 3 {
		insert(t, other, NoteArgs{N: n}, nil)
		if a := recv(t, ran, "a job inserted by another process"); a.N != n {
			t.Fatalf("ran %+v, want job %d", a, n)
		}
	}
}

// testWakesAcrossProcesses: with three worker processes that poll only
// hourly, every job another process inserts runs, one at a time and in a
// burst larger than any one process takes: where the store routes
// wake-ups to one process (backend.WakeRouter), none is left behind by the
// routing, and a burst reaches the others through the full claims of the
// first.
func testWakesAcrossProcesses(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan NoteArgs, 200)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- j.Args
		return nil
	}))
	for i := range 3 {
		cfg := fastConfig(ws, 2)
		cfg.PollInterval = time.Hour
		cfg.Queues = map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2, Prefetch: 2}}
		handle := be
		if i > 0 {
			handle = h.Reopen(t, be)
		}
		start(t, newClient(t, handle, cfg))
	}
	other := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	for n := range 10 {
		insert(t, other, NoteArgs{N: n}, nil)
		if a := recv(t, ran, "a job inserted by another process"); a.N != n {
			t.Fatalf("ran %+v, want job %d", a, n)
		}
	}
	const burst = 40
	params := make([]spool.InsertManyParams, burst)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: NoteArgs{N: 100 + i}}
	}
	if _, err := other.InsertMany(context.Background(), params); err != nil {
		t.Fatalf("insert a burst: %v", err)
	}
	seen := map[int]bool{}
	for range burst {
		a := recv(t, ran, "a job of a burst inserted by another process")
		if seen[a.N] || a.N < 100 {
			t.Fatalf("job %d ran twice or out of the burst", a.N)
		}
		seen[a.N] = true
	}
}
