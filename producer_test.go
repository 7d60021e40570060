package spool_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

type wakeArgs struct{}

func (wakeArgs) Kind() string { return "wake_test" }

// gatedBackend holds the first claim after it ran until the test releases
// it, and reports every wake-up once the client has taken it.
type gatedBackend struct {
	*memory.Backend
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

// migratedMemory returns a migrated memory store, closed when the test
// ends.
func migratedMemory(t *testing.T) *memory.Backend {
	t.Helper()
	inner := memory.New()
	t.Cleanup(func() { _ = inner.Close() })
	if err := inner.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return inner
}

// newGated returns a gatedBackend over a migrated memory store, its gate
// set: the first claim is held in flight until release is closed.
func newGated(t *testing.T) *gatedBackend {
	t.Helper()
	inner := migratedMemory(t)
	be := &gatedBackend{Backend: inner, claimed: make(chan struct{}), release: make(chan struct{}), woke: make(chan struct{}, 1)}
	be.gate.Store(true)
	return be
}

// startWakeClient starts a client on be with one queue configured as q,
// polling an hour apart, whose handler of wakeArgs signals ran; it is
// stopped when the test ends.
func startWakeClient(t *testing.T, be backend.Backend, q spool.QueueConfig) (c *spool.Client, ran <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	done := make(chan struct{}, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[wakeArgs]) error {
		done <- struct{}{}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: q},
		PollInterval: time.Hour,
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	return c, done
}

// TestWakeDuringClaimIsKept: a wake-up that arrives while a claim is in
// flight must survive that claim coming back short, since the claim may
// have looked before the job that caused the wake-up was committed. With
// polling an hour apart, a lost wake-up leaves the job waiting.
func TestWakeDuringClaimIsKept(t *testing.T) {
	ctx := context.Background()
	be := newGated(t)
	c, ran := startWakeClient(t, be, spool.QueueConfig{MaxWorkers: 1, Prefetch: -1})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(be.release) })
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
	releaseOnce.Do(func() { close(be.release) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job waited for a poll: the wake-up during the claim was lost")
	}
}

// lateArgs is the payload of TestNoStartAfterLeaseEnded.
type lateArgs struct {
	N int `json:"n"`
}

func (lateArgs) Kind() string { return "late_test" }

// TestNoStartAfterLeaseEnded: a claim whose reply arrives after the jobs'
// leases have ended (the process was paused, the network slow) must not
// start those jobs: rescue has already returned them to the queue, and a
// start now would be a second, possibly concurrent, run. They are handed
// back unstarted, and each job runs once, under the claim that follows.
func TestNoStartAfterLeaseEnded(t *testing.T) {
	ctx := context.Background()
	inner := migratedMemory(t)
	be := &gatedBackend{Backend: inner, claimed: make(chan struct{}), release: make(chan struct{}), woke: make(chan struct{}, 1)}
	be.gate.Store(true)

	const jobs = 5
	type start struct {
		id      int64
		attempt int16
	}
	starts := make(chan start, 4*jobs)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[lateArgs]) error {
		starts <- start{j.ID, j.Attempt}
		return nil
	}))
	var logs conformance.LogBuffer
	c, err := spool.NewClient(be, &spool.Config{
		Workers:       ws,
		Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: jobs}},
		LeaseDuration: 300 * time.Millisecond,
		// Rescue is run by the test, and the poll's release of stale
		// buffered jobs never comes: only the start check can stop the
		// late starts.
		RescueInterval: time.Hour,
		PollInterval:   time.Hour,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		if _, err := c.Insert(ctx, lateArgs{N: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	// A stop waits for the claim in flight: let the held one go first if
	// the test fails before it does.
	var releaseOnce sync.Once
	releaseHeld := func() { releaseOnce.Do(func() { close(be.release) }) }
	defer releaseHeld()
	<-be.claimed // the claim committed; its reply is held back

	// The leases end by the store's clock and rescue returns the jobs.
	deadline := time.Now().Add(10 * time.Second)
	for rescued := 0; rescued < jobs; {
		res, err := inner.JobRescue(ctx, &backend.JobRescueParams{})
		if err != nil {
			t.Fatal(err)
		}
		rescued += res.Retried
		if time.Now().After(deadline) {
			t.Fatalf("rescued %d of %d jobs", rescued, jobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	releaseHeld() // the stale reply arrives

	seen := map[int64]int16{}
	for len(seen) < jobs {
		select {
		case s := <-starts:
			if s.attempt != 2 {
				t.Fatalf("job %d started under attempt %d: the claim whose lease had ended was started", s.id, s.attempt)
			}
			if _, dup := seen[s.id]; dup {
				t.Fatalf("job %d started twice", s.id)
			}
			seen[s.id] = s.attempt
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d jobs ran after the late reply", len(seen), jobs)
		}
	}
	// The late reply's jobs reach the start check once a worker is free;
	// a wake-up during the stalled claim may have sent a second claim that
	// took the rescued jobs first, so the check can come after their runs.
	for !strings.Contains(logs.String(), "reply came late") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("no warning naming the late reply; logs:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-starts:
		t.Fatalf("job %d (attempt %d) started again", s.id, s.attempt)
	default:
	}
}

type startedArgs struct{}

func (startedArgs) Kind() string { return "started_test" }

// TestJobStartedAt: a handler's context carries when the engine started it
// (after the job was claimed, before the handler's own first line), and
// other contexts carry none.
func TestJobStartedAt(t *testing.T) {
	ctx := context.Background()
	if _, ok := spool.JobStartedAt(ctx); ok {
		t.Fatal("a start time outside a job")
	}
	be := memory.New()
	defer be.Close()
	type seen struct{ started, first time.Time }
	got := make(chan seen, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[startedArgs]) error {
		first := time.Now()
		at, ok := spool.JobStartedAt(ctx)
		if !ok {
			t.Error("no start time in the handler's context")
		}
		got <- seen{at, first}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}, Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	inserted := time.Now()
	if _, err := c.Insert(ctx, startedArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	select {
	case s := <-got:
		if s.started.Before(inserted) || s.started.After(s.first) {
			t.Fatalf("started at %s: want after the insert (%s) and not after the handler's first line (%s)", s.started, inserted, s.first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run")
	}
}

// claimCounter counts flow claims.
type claimCounter struct {
	*memory.Backend
	flowClaims atomic.Int64
}

func (c *claimCounter) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	c.flowClaims.Add(1)
	return c.Backend.JobClaimFlow(ctx, p, claim)
}

// TestFlowIdleQueueIsNotPolledFast: a flow-held queue looks again every
// FlowPollInterval, but an idle one (nothing held back: no jobs) only at
// the ordinary poll.
func TestFlowIdleQueueIsNotPolledFast(t *testing.T) {
	ctx := context.Background()
	be := &claimCounter{Backend: memory.New()}
	defer be.Close()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[startedArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{
		Workers: ws,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4, Flow: &spool.Flow{
			GlobalLimit: 10, KeyLimit: 1, Rate: &spool.RateLimit{Limit: 2, Per: time.Second, Burst: 1}}}},
		PollInterval:     500 * time.Millisecond,
		FlowPollInterval: 10 * time.Millisecond,
		Logger:           conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	time.Sleep(time.Second)
	if n := be.flowClaims.Load(); n > 5 {
		t.Fatalf("%d flow claims in 1 s on an idle queue, want about 2 (the 500 ms poll), not one per 10 ms", n)
	}
}

// askRecorder tracks the claims of a gatedBackend in flight: the most at
// once, and the most jobs they asked for at once.
type askRecorder struct {
	*gatedBackend
	mu               sync.Mutex
	out, asked       int
	maxOut, maxAsked int
}

func (a *askRecorder) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	a.mu.Lock()
	a.out, a.asked = a.out+1, a.asked+p.Max
	a.maxOut, a.maxAsked = max(a.maxOut, a.out), max(a.maxAsked, a.asked)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.out, a.asked = a.out-1, a.asked-p.Max
		a.mu.Unlock()
	}()
	return a.gatedBackend.JobClaim(ctx, p)
}

// quietListen is an askRecorder whose store's wake-ups never reach the
// client: its only wake-ups are the one the subscription gives at start
// and its own inserts'; it counts the claims sent.
type quietListen struct {
	*askRecorder
	claims *atomic.Int64
}

func (q quietListen) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	q.claims.Add(1)
	return q.askRecorder.JobClaim(ctx, p)
}

func (q quietListen) Listen(ctx context.Context, ready func(), _ func(backend.Wake)) error {
	return q.askRecorder.Listen(ctx, ready, func(backend.Wake) {})
}

// TestStartWakeSendsNoSecondClaim: the wake-up a client's subscription
// gives its producers at start comes before their first claim, which
// covers it; it must not send a second claim alongside the first (each
// process's start did, on a connection of its own). While the first claim
// is held, only the insert's wake-up sends another.
func TestStartWakeSendsNoSecondClaim(t *testing.T) {
	be := quietListen{&askRecorder{gatedBackend: newGated(t)}, new(atomic.Int64)}
	insertWhileFirstClaimHeld(t, be.askRecorder, be, spool.QueueConfig{MaxWorkers: 40, Prefetch: 60}, "its wake-up sent no claim")
	if n := be.claims.Load(); n != 2 {
		t.Fatalf("%d claims sent; want 2: the held first claim and the insert's", n)
	}
}

// TestWakeDuringClaimSendsSecondClaim: a job whose wake-up arrives while a
// claim is held in flight runs at once, through a second claim, without
// waiting for the first one's reply; and the two claims together ask for
// no more than the queue can hold (workers plus prefetch).
func TestWakeDuringClaimSendsSecondClaim(t *testing.T) {
	be := &askRecorder{gatedBackend: newGated(t)}
	const workers, prefetch = 40, 60
	insertWhileFirstClaimHeld(t, be, be, spool.QueueConfig{MaxWorkers: workers, Prefetch: prefetch}, "no second claim was sent")
	be.mu.Lock()
	maxOut, maxAsked := be.maxOut, be.maxAsked
	be.mu.Unlock()
	// The job ran while the first claim was held, so a second went out;
	// more may (a wake-up arriving while claims are out sends one at once,
	// and an insert can wake the producer twice: its own process's
	// wake-up and the store's), up to the engine's four
	// (TestWakesDuringClaimsSendMoreClaims), never past the queue's room.
	if maxOut < 2 || maxOut > 4 || maxAsked > workers+prefetch {
		t.Fatalf("at most %d claims in flight at once, asking for up to %d jobs together; want 2 to 4, and at most %d", maxOut, maxAsked, workers+prefetch)
	}
}

// insertWhileFirstClaimHeld starts a client of store with queue config q,
// inserts a job while its first claim (which found nothing) is held in
// flight by rec, and waits for the job to run; missing says why it would
// not. The held claim is released when the test ends.
func insertWhileFirstClaimHeld(t *testing.T, rec *askRecorder, store backend.Backend, q spool.QueueConfig, missing string) {
	t.Helper()
	c, ran := startWakeClient(t, store, q)
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(rec.release) }) })
	<-rec.claimed // the first claim found nothing and is held in flight
	if _, err := c.Insert(context.Background(), wakeArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job waited for the claim in flight: " + missing)
	}
}

// holdingBackend holds every claim in flight, once it has taken its jobs,
// until release is closed, says so on claimed, and tracks the claims out:
// the most at once, and the most jobs they asked for at once.
type holdingBackend struct {
	*memory.Backend
	claimed          chan struct{}
	release          chan struct{}
	mu               sync.Mutex
	out, asked       int
	maxOut, maxAsked int
}

func (h *holdingBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	h.mu.Lock()
	h.out, h.asked = h.out+1, h.asked+p.Max
	h.maxOut, h.maxAsked = max(h.maxOut, h.out), max(h.maxAsked, h.asked)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.out, h.asked = h.out-1, h.asked-p.Max
		h.mu.Unlock()
	}()
	rows, err := h.Backend.JobClaim(ctx, p)
	select {
	case h.claimed <- struct{}{}:
	case <-h.release:
	}
	<-h.release
	return rows, err
}

// TestWakesDuringClaimsSendMoreClaims: while claims are held in flight and
// workers are idle, each job's wake-up sends a claim of its own at once,
// up to four claims out (the engine's maxClaimsOut), which together ask
// for no more than the queue can hold; every job runs once the claims
// come back.
func TestWakesDuringClaimsSendMoreClaims(t *testing.T) {
	ctx := context.Background()
	const workers, prefetch, claimsOut = 40, 60, 4
	be := &holdingBackend{Backend: migratedMemory(t), claimed: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(be.release) }) }
	c, ran := startWakeClient(t, be, spool.QueueConfig{MaxWorkers: workers, Prefetch: prefetch})
	// Registered after the client's stop, so run before it: a stop waits
	// for the claims out.
	t.Cleanup(release)
	<-be.claimed // the first claim found nothing and is held in flight
	for i := 1; i < claimsOut; i++ {
		if _, err := c.Insert(ctx, wakeArgs{}, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-be.claimed:
		case <-time.After(10 * time.Second):
			t.Fatalf("job %d's wake-up sent no claim while %d claims were out", i, i)
		}
	}
	// One more job, whose wake-up finds every claim out: a claim sent once
	// one is back takes it.
	if _, err := c.Insert(ctx, wakeArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	release()
	for i := range claimsOut {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d jobs ran", i, claimsOut)
		}
	}
	be.mu.Lock()
	maxOut, maxAsked := be.maxOut, be.maxAsked
	be.mu.Unlock()
	if maxOut != claimsOut || maxAsked > workers+prefetch {
		t.Fatalf("at most %d claims in flight at once, asking for up to %d jobs together; want %d, and at most %d", maxOut, maxAsked, claimsOut, workers+prefetch)
	}
}

// TestWorkerLeavesLateBufferedJobs: a worker that finished a job takes the
// next buffered one itself, but not one whose claim has used half its lease
// waiting for a free worker. Such a job goes back unstarted, with the log
// naming the wait (not a stall of the process), and runs once, under a later
// claim, with more than half its lease ahead of it.
func TestWorkerLeavesLateBufferedJobs(t *testing.T) {
	ctx := context.Background()
	inner := migratedMemory(t)
	const lease = 400 * time.Millisecond
	const jobs = 4
	var (
		mu      sync.Mutex
		runs    = map[int64]int{}
		short   []string // starts with half the lease or less ahead
		blocked atomic.Bool
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[lateArgs]) error {
		left := time.Until(*j.LeasedUntil)
		mu.Lock()
		runs[j.ID]++
		if left <= lease/2 {
			short = append(short, fmt.Sprintf("job %d started with %s of its lease left", j.ID, left))
		}
		mu.Unlock()
		// The first job holds the only worker past half the lease of the
		// jobs claimed with it.
		if blocked.CompareAndSwap(false, true) {
			time.Sleep(lease/2 + 100*time.Millisecond)
		}
		return nil
	}))
	var logs conformance.LogBuffer
	c, err := spool.NewClient(inner, &spool.Config{
		Workers:       ws,
		Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1, Prefetch: jobs}},
		LeaseDuration: lease,
		// Neither the poll's release of stale buffered jobs nor rescue
		// comes: only the worker's own check can keep the late jobs back.
		PollInterval:   time.Hour,
		RescueInterval: time.Hour,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]spool.InsertManyParams, jobs)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: lateArgs{N: i}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stats, err := inner.QueueStatsAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, q := range stats {
			n += q.Counts[backend.StateCompleted]
		}
		if n == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed; logs:\n%s", n, jobs, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	if len(short) > 0 {
		t.Errorf("late buffered jobs were started: %s", strings.Join(short, "; "))
	}
	out := logs.String()
	if !strings.Contains(out, "waited for a free worker") {
		t.Errorf("no log naming the wait for a free worker; logs:\n%s", out)
	}
	if strings.Contains(out, "stalled between its claim and its start") {
		t.Errorf("the late jobs were put down to a stalled process; logs:\n%s", out)
	}
}

// deafGated is a gatedBackend whose wake-ups never reach the client, as a
// store that announces inserts but not jobs handed back (MySQL's new-jobs
// read) behaves for a release.
type deafGated struct{ *gatedBackend }

func (d deafGated) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return d.Backend.Listen(ctx, ready, func(backend.Wake) {})
}

// TestLateReplyJobsClaimedAgain: jobs handed back unstarted because their
// claim's reply came late are claimed again at once, not at the next poll
// (an hour here), whether or not the store announces the release.
func TestLateReplyJobsClaimedAgain(t *testing.T) {
	ctx := context.Background()
	gated := newGated(t)
	be := deafGated{gated}
	starts := make(chan int16, 4)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[lateArgs]) error {
		starts <- j.Attempt
		return nil
	}))
	var logs conformance.LogBuffer
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		LeaseDuration:  time.Second,
		RescueInterval: time.Hour,
		PollInterval:   time.Hour,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, lateArgs{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	<-gated.claimed
	// Past half the lease (the start window), before its end: the job is
	// handed back, its lease still held, and nothing rescues it.
	time.Sleep(700 * time.Millisecond)
	close(gated.release)
	select {
	case attempt := <-starts:
		if attempt != 1 {
			t.Fatalf("the job ran under attempt %d, want 1 (a release gives the attempt back)", attempt)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the job handed back after a late reply did not run again; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "reply came late") {
		t.Fatalf("no warning naming the late reply; logs:\n%s", logs.String())
	}
}
