package backendtest

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testClaimOrder(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	// Inserted out of order: priority first, then run_at, then id.
	ids := map[string]int64{}
	ids["p5"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 5})
	ids["p0-late"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0})
	ids["p0-early"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, RunAt: past})
	ids["p0-late2"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, RunAt: time.Now().Add(-time.Millisecond)})
	ids["future"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, Delay: time.Hour})
	ids["otherq"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "other"})
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 3, Lease: time.Minute, ClaimID: "t"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(rows) != 3 || rows[0].ID != ids["p0-early"] || rows[1].ID != ids["p0-late2"] && rows[1].ID != ids["p0-late"] || rows[2].ID != ids["p0-late"] && rows[2].ID != ids["p0-late2"] {
		t.Fatalf("claim order: %v", rowIDs(rows))
	}
	for _, r := range rows {
		if r.State != backend.StateRunning || r.Attempt != 1 || r.Fence != 1 || r.LeasedUntil == nil || r.LeasedBy != "t" {
			t.Fatalf("claimed row: %+v", r)
		}
	}
	rows, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 10, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != ids["p5"] {
		t.Fatalf("second claim: %v %v (want only p5: the future job waits)", rowIDs(rows), err)
	}
}

func rowIDs(rows []*backend.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// testNoJobRunsTwice runs many clients (as separate processes would) with
// many workers each over one store and audits every run.
func testNoJobRunsTwice(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const jobs = 4000
	const clients = 4
	var (
		mu   sync.Mutex
		runs = make(map[int]int, jobs)
		done atomic.Int64
		all  = make(chan struct{})
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		mu.Lock()
		runs[j.Args.N]++
		mu.Unlock()
		if done.Add(1) == jobs {
			close(all)
		}
		return nil
	}))
	params := Notes(0, jobs)
	// What the clients warn of is kept, to be shown if a job ran twice: a
	// second run follows a lease that ended (a heartbeat that failed, a
	// stalled process), and the warnings say which.
	warnings := &LogBuffer{}
	producerClient := newClient(t, be, &spool.Config{Logger: quietLogger()})
	if _, err := producerClient.InsertMany(context.Background(), params[:jobs/2]); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < clients; i++ {
		cbe := be
		if i > 0 {
			cbe = h.Reopen(t, be)
		}
		cfg := fastConfig(ws, 16)
		cfg.Queues[spool.DefaultQueue] = spool.QueueConfig{MaxWorkers: 16, Prefetch: 7 * (i + 1)}
		cfg.Logger = slog.New(slog.NewTextHandler(warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
		start(t, newClient(t, cbe, cfg))
	}
	// The rest arrive while the clients work, in small batches.
	for i := jobs / 2; i < jobs; i += 100 {
		if _, err := producerClient.InsertMany(context.Background(), params[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	recv(t, all, "all jobs to run")
	deadline := time.Now().Add(15 * time.Second)
	for countStates(t, be)[backend.StateCompleted] != jobs {
		if time.Now().After(deadline) {
			t.Fatalf("states = %v, want %d completed", countStates(t, be), jobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := 0; n < jobs; n++ {
		if runs[n] != 1 {
			warned := warnings.String()
			if warned == "" {
				warned = "(nothing)"
			}
			t.Fatalf("job %d ran %d times; the clients warned:\n%s", n, runs[n], warned)
		}
	}
	if got := done.Load(); got != jobs {
		t.Fatalf("%d runs for %d jobs", got, jobs)
	}
}

func testQueueConcurrency(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var (
		cur, peak atomic.Int32
		done      = make(chan struct{}, 100)
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // hold the slot so overlap can show
		cur.Add(-1)
		done <- struct{}{}
		return nil
	}))
	cfg := fastConfig(ws, 3)
	cfg.Queues["slow"] = spool.QueueConfig{MaxWorkers: 1}
	c := newClient(t, be, cfg)
	InsertNotes(t, c, 0, 60)
	start(t, c)
	for range 60 {
		recv(t, done, "job")
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..3 with MaxWorkers 3", p)
	}
}

func testDelayedJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan time.Time, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- time.Now()
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	inserted := time.Now()
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{Delay: 300 * time.Millisecond})
	at := recv(t, ran, "delayed job")
	if d := at.Sub(inserted); d < 250*time.Millisecond {
		t.Fatalf("delayed job ran after %s", d)
	}
	waitState(t, be, id, backend.StateCompleted)
}
