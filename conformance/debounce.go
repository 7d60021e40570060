package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// debounced returns insert options of a debounced key.
func debounced(key string, window, maxWait time.Duration, replace bool) *spool.InsertOpts {
	return &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: key,
		Debounce: &spool.DebounceOpts{Window: window, MaxWait: maxWait, ReplaceArgs: replace}}}
}

// argsN decodes a note job's N.
func argsN(t *testing.T, j *backend.JobRow) int {
	t.Helper()
	var a NoteArgs
	if err := json.Unmarshal(j.Args, &a); err != nil {
		t.Fatalf("job %d args %s: %v", j.ID, j.Args, err)
	}
	return a.N
}

// pendingOfKind lists the pending jobs of kind, in one read.
func pendingOfKind(ctx context.Context, be backend.Backend, kind string) ([]*backend.JobRow, error) {
	return be.JobList(ctx, &backend.JobListParams{Kind: kind, Limit: 1000,
		States: []backend.State{backend.StateAvailable, backend.StateScheduled, backend.StateRetryable}})
}

// testDebounceMoves: an insert that meets the key's pending job moves its
// run time to now + window (never earlier), keeps or replaces its args, and
// never moves it past its creation + max wait; bad options change nothing.
func testDebounceMoves(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	const window, maxWait = time.Hour, 3 * time.Hour
	first := insertResult(t, c, NoteArgs{N: 1}, debounced("d", window, maxWait, false))
	if first.Duplicate {
		t.Fatalf("first insert of a debounced key: %+v, want a new job", first)
	}
	j1 := getJob(t, be, first.ID)
	if d := j1.RunAt.Sub(j1.CreatedAt); d < window-time.Millisecond || d > window+time.Second {
		t.Fatalf("new debounced job runs %s after its creation, want the window %s", d, window)
	}
	if j1.State != backend.StateScheduled {
		t.Fatalf("new debounced job is %s, want scheduled", j1.State)
	}
	second := insertResult(t, c, NoteArgs{N: 2}, debounced("d", window, maxWait, false))
	if !second.Duplicate || second.ID != first.ID {
		t.Fatalf("second insert: %+v, want the pending job %d moved", second, first.ID)
	}
	j2 := getJob(t, be, first.ID)
	if j2.RunAt.Before(j1.RunAt) || j2.RunAt.After(j2.CreatedAt.Add(maxWait)) {
		t.Fatalf("moved run time %s: want from %s to created + max wait %s", j2.RunAt, j1.RunAt, j2.CreatedAt.Add(maxWait))
	}
	if n := argsN(t, j2); n != 1 {
		t.Fatalf("args N %d after an insert without ReplaceArgs, want the first insert's 1", n)
	}
	third := insertResult(t, c, NoteArgs{N: 3}, debounced("d", window, maxWait, true))
	if !third.Duplicate || third.ID != first.ID {
		t.Fatalf("third insert: %+v, want the pending job %d moved", third, first.ID)
	}
	if n := argsN(t, getJob(t, be, first.ID)); n != 3 {
		t.Fatalf("args N %d after an insert with ReplaceArgs, want 3", n)
	}

	// A max wait shorter than the window bounds the first run time and
	// every move.
	capped := insertResult(t, c, NoteArgs{}, debounced("m", time.Hour, 30*time.Minute, false))
	jc := getJob(t, be, capped.ID)
	if d := jc.RunAt.Sub(jc.CreatedAt); d != 30*time.Minute {
		t.Fatalf("job with max wait 30m < window 1h runs %s after creation, want 30m", d)
	}
	again := insertResult(t, c, NoteArgs{}, debounced("m", time.Hour, 30*time.Minute, false))
	if jm := getJob(t, be, capped.ID); !again.Duplicate || !jm.RunAt.Equal(jc.RunAt) {
		t.Fatalf("insert at the max wait: %+v, run time %s; want the job kept at %s", again, jm.RunAt, jc.RunAt)
	}

	// Bad options: typed errors, nothing written.
	var inv *spool.InvalidJobError
	for name, opts := range map[string]*spool.InsertOpts{
		"zero window":       debounced("x", 0, time.Hour, false),
		"negative max wait": debounced("x", time.Second, -time.Second, false),
		"with states": {Unique: &spool.UniqueOpts{Key: "x", States: []spool.JobState{backend.StateAvailable, backend.StateScheduled, backend.StateRetryable, backend.StateRunning},
			Debounce: &spool.DebounceOpts{Window: time.Second}}},
		"with delay": {Delay: time.Second, Unique: &spool.UniqueOpts{Key: "x", Debounce: &spool.DebounceOpts{Window: time.Second}}},
	} {
		if _, err := c.Insert(ctx, NoteArgs{}, opts); !errors.As(err, &inv) {
			t.Errorf("%s: %v, want an *InvalidJobError", name, err)
		}
	}
	_, err := c.InsertMany(ctx, []spool.InsertManyParams{{Args: NoteArgs{}}, {Args: NoteArgs{}, InsertOpts: debounced("x", time.Second, 0, false)}})
	if !errors.As(err, &inv) {
		t.Errorf("InsertMany with a debounced job among others: %v, want an *InvalidJobError", err)
	}
	if n := countKind(t, be, "note"); n != 2 {
		t.Fatalf("%d jobs stored, want 2 (one per key)", n)
	}
}

// testDebounceNewCycle: while the key's job runs, an insert makes the next
// cycle's job, which later inserts move; the running job is untouched.
func testDebounceNewCycle(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started, release := make(chan int64, 1), make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.ID
		<-release
		return nil
	}))
	cfg := fastConfig(ws, 1)
	worker := newClient(t, be, cfg)
	start(t, worker)
	defer close(release)
	c := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	a := insertResult(t, c, NoteArgs{N: 1}, debounced("cycle", 10*time.Millisecond, 0, false))
	if id := recv(t, started, "the first cycle's job to start"); id != a.ID {
		t.Fatalf("started job %d, want %d", id, a.ID)
	}
	b := insertResult(t, c, NoteArgs{N: 2}, debounced("cycle", time.Hour, 0, false))
	if b.Duplicate || b.ID == a.ID {
		t.Fatalf("insert while the key's job runs: %+v, want a new job (not %d)", b, a.ID)
	}
	bb := insertResult(t, c, NoteArgs{N: 3}, debounced("cycle", time.Hour, 0, false))
	if !bb.Duplicate || bb.ID != b.ID {
		t.Fatalf("insert after the new cycle began: %+v, want job %d moved", bb, b.ID)
	}
	if j := getJob(t, be, a.ID); j.State != backend.StateRunning {
		t.Fatalf("first job is %s, want still running", j.State)
	}
	pending, err := pendingOfKind(context.Background(), be, "note")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != b.ID {
		t.Fatalf("pending jobs %d, want exactly job %d", len(pending), b.ID)
	}
}

// testDebounceConcurrent: twelve goroutines in three handles insert one
// debounced key while a worker runs its jobs: a read of the pending jobs
// never finds two, every insert names a job that exists, and no job's run
// time is past its creation plus the max wait.
func testDebounceConcurrent(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	var ran atomic.Int64
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran.Add(1)
		return nil
	}))
	cfg := fastConfig(ws, 4)
	worker := newClient(t, be, cfg)
	start(t, worker)
	clients := []*spool.Client{
		newClient(t, be, &spool.Config{Logger: quietLogger(t)}),
		newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)}),
		newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)}),
	}
	const (
		goroutines = 12
		each       = 10
		window     = 3 * time.Millisecond
		maxWait    = 10 * time.Millisecond
	)
	ctx := context.Background()
	var (
		wg, sampler sync.WaitGroup
		mu          sync.Mutex
		ids         = map[int64]bool{}
		errs        []error
		worst       []*backend.JobRow
		gate        = make(chan struct{})
		done        = make(chan struct{})
	)
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			p, err := pendingOfKind(ctx, be, "note")
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else if len(p) > 1 && len(p) > len(worst) {
				worst = p
			}
			mu.Unlock()
			time.Sleep(time.Millisecond) // a sample, not a synchronisation
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for i := range each {
				res, err := clients[g%len(clients)].Insert(ctx, NoteArgs{N: g*each + i}, debounced("race", window, maxWait, true))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					ids[res.ID] = true
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // pacing, so that cycles end while inserts go on
			}
		}()
	}
	close(gate)
	wg.Wait()
	close(done)
	sampler.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d inserts or reads failed, first: %v", len(errs), errs[0])
	}
	if worst != nil {
		for _, j := range worst {
			t.Logf("pending at once: job %d %s run_at %s", j.ID, j.State, j.RunAt)
		}
		t.Fatalf("%d pending jobs of one debounced key at once, want at most 1", len(worst))
	}
	for id := range ids {
		j := getJob(t, be, id)
		if j.RunAt.After(j.CreatedAt.Add(maxWait)) {
			t.Errorf("job %d runs at %s, past its creation %s + max wait %s", id, j.RunAt, j.CreatedAt, maxWait)
		}
	}
	if n := countKind(t, be, "note"); n != len(ids) {
		t.Fatalf("%d jobs stored, inserts named %d", n, len(ids))
	}
	// Every cycle's job runs: the worker drains them all.
	want := int64(len(ids))
	deadline := time.Now().Add(30 * time.Second)
	for ran.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ran.Load(); got != want {
		t.Fatalf("%d jobs ran, want the %d made", got, want)
	}
	t.Logf("%d inserts made %d jobs", goroutines*each, len(ids))
}

// testDebounceTx: a debounced insert in a transaction that rolls back
// leaves the key free; one that commits is the key's job.
func testDebounceTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	opts := debounced("tx", time.Hour, 0, false)
	tx := h.BeginTx(t, be)
	in, err := c.InsertTx(ctx, btx(tx), NoteArgs{}, opts)
	if err != nil || in.Duplicate {
		t.Fatalf("insert in tx: %+v, %v", in, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	after := insertResult(t, c, NoteArgs{}, opts)
	if after.Duplicate {
		t.Fatalf("insert after rollback: %+v, want a new job", after)
	}
	tx = h.BeginTx(t, be)
	if in, err := c.InsertTx(ctx, btx(tx), NoteArgs{}, opts); err != nil || !in.Duplicate || in.ID != after.ID {
		t.Fatalf("insert in tx of a committed key: %+v, %v; want job %d moved", in, err, after.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countKind(t, be, "note"); n != 1 {
		t.Fatalf("%d jobs stored, want 1", n)
	}
}

// testDebounceEarlierCycleRetry: a job of an earlier cycle that fails and
// waits for its retry is pending beside the key's current job, as
// docs/unique.md says, and takes no inserts: they move the current job.
func testDebounceEarlierCycleRetry(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started, release := make(chan int64, 1), make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.ID
		<-release
		return errors.New("fails, to retry in an hour")
	}))
	cfg := fastConfig(ws, 1)
	cfg.RetryPolicy = spool.ConstantRetryPolicy{Delay: time.Hour}
	worker := newClient(t, be, cfg)
	start(t, worker)
	c := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	a := insertResult(t, c, NoteArgs{N: 1}, debounced("retry", 10*time.Millisecond, 0, false))
	if id := recv(t, started, "the first cycle's job to start"); id != a.ID {
		t.Fatalf("started job %d, want %d", id, a.ID)
	}
	b := insertResult(t, c, NoteArgs{N: 2}, debounced("retry", time.Hour, 0, false))
	if b.Duplicate {
		t.Fatalf("insert while the key's job runs: %+v, want a new job", b)
	}
	close(release)
	waitState(t, be, a.ID, backend.StateRetryable)
	again := insertResult(t, c, NoteArgs{N: 3}, debounced("retry", time.Hour, 0, false))
	if !again.Duplicate || again.ID != b.ID {
		t.Fatalf("insert after the earlier cycle's job failed: %+v, want job %d (the current one) moved", again, b.ID)
	}
	pending, err := pendingOfKind(context.Background(), be, "note")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("%d pending jobs, want the retrying job %d and the current %d", len(pending), a.ID, b.ID)
	}
}
