package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testClaimOrder(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
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
	for _, r := range rows {
		if r.State != backend.StateRunning || r.Attempt != 1 || r.Fence != 1 || r.LeasedUntil == nil || r.LeasedBy != "t" {
			t.Fatalf("claimed row: %+v", r)
		}
	}
	if sp := h.spread(); sp != nil {
		claimOrderPerStore(t, be, sp, ids, rows)
		return
	}
	if len(rows) != 3 || rows[0].ID != ids["p0-early"] || rows[1].ID != ids["p0-late2"] && rows[1].ID != ids["p0-late"] || rows[2].ID != ids["p0-late"] && rows[2].ID != ids["p0-late2"] {
		t.Fatalf("claim order: %v", rowIDs(rows))
	}
	rows, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 10, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != ids["p5"] {
		t.Fatalf("second claim: %v %v (want only p5: the future job waits)", rowIDs(rows), err)
	}
}

// claimOrderPerStore checks claim order where the queue's jobs are spread
// over stores that each order their own: a claim of 3 of the 4 runnable
// jobs takes 3, and on each store, the jobs it takes come in order
// (priority, then run time; the two jobs due about now in either order)
// and before every job it leaves on that store. A second claim takes the
// one left, never the future job or the other queue's.
func claimOrderPerStore(t *testing.T, be backend.Backend, sp *Spread, ids map[string]int64, first []*backend.JobRow) {
	rank := map[int64]int{ids["p0-early"]: 0, ids["p0-late"]: 1, ids["p0-late2"]: 1, ids["p5"]: 2}
	names := map[int64]string{}
	for name, id := range ids {
		names[id] = fmt.Sprintf("%s (store %d)", name, sp.StoreOf(be, id))
	}
	show := func(rows []*backend.JobRow) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = names[r.ID]
		}
		return out
	}
	second, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 10, Lease: time.Minute, ClaimID: "t"})
	if err != nil {
		t.Fatalf("second claim: %v", err)
	}
	if len(first) != 3 || len(second) != 1 {
		t.Fatalf("claims of 3 and then 10 took %v and %v: want 3 of the 4 runnable jobs, then the one left", show(first), show(second))
	}
	seen := map[int64]bool{}
	for _, r := range append(slices.Clone(first), second...) {
		if _, ok := rank[r.ID]; !ok || seen[r.ID] {
			t.Fatalf("claims took %v and %v: %s is not runnable or was taken twice", show(first), show(second), names[r.ID])
		}
		seen[r.ID] = true
	}
	// On each store: the first claim's jobs in order, and none after the
	// job left there.
	last := map[int]int{}
	for _, r := range first {
		s := sp.StoreOf(be, r.ID)
		if prev, ok := last[s]; ok && rank[r.ID] < prev {
			t.Fatalf("first claim %v: on store %d, %s came after a job that runs later", show(first), s, names[r.ID])
		}
		last[s] = rank[r.ID]
	}
	left := second[0]
	if prev, ok := last[sp.StoreOf(be, left.ID)]; ok && rank[left.ID] < prev {
		t.Fatalf("first claim %v left %s, which runs before a job it took on the same store", show(first), names[left.ID])
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
	jobs := h.loadJobs(4000)
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
		if done.Add(1) == int64(jobs) {
			close(all)
		}
		return nil
	}))
	params := Notes(0, jobs)
	// What the clients warn of is kept, to be shown if a job ran twice: a
	// second run follows a lease that ended (a heartbeat that failed, a
	// stalled process), and the warnings say which.
	warnings := &LogBuffer{}
	producerClient := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
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
	// The bound is on progress, not on the whole run: on a loaded machine
	// (the race detector, other packages' tests) 4,000 jobs through 4
	// clients may take longer than any fixed time, but a run that stops
	// finishing jobs is a failure.
	awaitProgress(t, all, done.Load, "all jobs to run")
	deadline := time.Now().Add(15 * time.Second)
	for countStates(t, be)[backend.StateCompleted] != int64(jobs) {
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
	if got := done.Load(); got != int64(jobs) {
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
