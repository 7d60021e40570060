package spool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// oneWorkerClient is a quiet client of store with one worker on the
// default queue, and the given lease (0: the default).
func oneWorkerClient(t *testing.T, store backend.Backend, ws *spool.Workers, lease time.Duration) *spool.Client {
	t.Helper()
	client, err := spool.NewClient(store, &spool.Config{
		Workers:       ws,
		Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		LeaseDuration: lease,
		Logger:        quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// retryDeadlines wraps a store and keeps the deadline of the context of
// every finish that records a retry.
type retryDeadlines struct {
	backend.Backend
	mu        sync.Mutex
	deadlines []time.Time
}

func (r *retryDeadlines) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	for _, f := range p.Finishes {
		if f.Outcome == backend.OutcomeRetry {
			dl, _ := ctx.Deadline()
			r.mu.Lock()
			r.deadlines = append(r.deadlines, dl)
			r.mu.Unlock()
			break
		}
	}
	return r.Backend.JobFinishMany(ctx, p)
}

// TestStopGiveUpWithinItsGrace: a stop whose deadline passes while a handler
// ignores its context records that job's retry within the half second
// after the deadline that Stop promises (docs/guarantees.md, promise 7),
// counted from the deadline itself: the write's context ends by then. It
// once had half a second of its own after the handlers' half second, so a
// slow store made Stop return a second after its deadline (lab chaos saw
// 1.08 s on a loaded PostgreSQL).
func TestStopGiveUpWithinItsGrace(t *testing.T) {
	ctx := context.Background()
	store := &retryDeadlines{Backend: memory.New()}
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		close(started)
		<-release // ignores its context
		return nil
	}))
	client := oneWorkerClient(t, store, ws, 0)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	<-started
	deadline := time.Now().Add(20 * time.Millisecond)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var stuck *spool.StopTimeoutError
	if err := client.Stop(sctx); !errors.As(err, &stuck) {
		t.Fatalf("stop: %v, want a *StopTimeoutError", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.deadlines) != 1 {
		t.Fatalf("%d retries recorded, want 1", len(store.deadlines))
	}
	if limit := deadline.Add(500 * time.Millisecond); store.deadlines[0].IsZero() || store.deadlines[0].After(limit) {
		t.Fatalf("the retry's write may run until %s, past the stop's deadline plus half a second (%s)",
			store.deadlines[0].Format("15:04:05.000"), limit.Format("15:04:05.000"))
	}
}

// slowRetries wraps a store whose writes of retries hang until their
// context ends, as on a store too slow or unreachable to take them; it
// notes when the first such write began and when it was cut off.
type slowRetries struct {
	backend.Backend
	writing chan struct{} // closed as the first retry's write begins
	once    sync.Once
	mu      sync.Mutex
	cut     time.Time // when that write's context ended
}

func (s *slowRetries) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	for _, f := range p.Finishes {
		if f.Outcome == backend.OutcomeRetry {
			s.once.Do(func() { close(s.writing) })
			<-ctx.Done()
			s.mu.Lock()
			if s.cut.IsZero() {
				s.cut = time.Now()
			}
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	return s.Backend.JobFinishMany(ctx, p)
}

// TestStopReportsUnwrittenOutcomes: a stop that runs out of time while an
// outcome is still being written keeps writing it for the whole grace (its
// deadline plus half a second), then gives up and says so: its error is a
// *StopTimeoutError naming the job in Unwritten, not the bare context error
// that means every outcome was written. The job stays running under its
// lease, and rescue returns it with its attempt counted and an error that
// says why.
func TestStopReportsUnwrittenOutcomes(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &slowRetries{Backend: mem, writing: make(chan struct{})}
	started := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		close(started)
		<-ctx.Done() // heeds its context: the retry is the stop's to write
		return ctx.Err()
	}))
	client := oneWorkerClient(t, store, ws, time.Second)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	deadline := time.Now().Add(20 * time.Millisecond)
	sctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err = client.Stop(sctx)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError matching context.DeadlineExceeded", err, err)
	}
	if len(se.Jobs) != 0 || len(se.Unwritten) != 1 || se.Unwritten[0] != res.ID {
		t.Fatalf("stuck %+v, unwritten %v: want no stuck handler and job %d unwritten", se.Jobs, se.Unwritten, res.ID)
	}
	select {
	case <-store.writing:
	default:
		t.Fatal("the stop reported an unwritten outcome it never tried to write")
	}
	// Timers never fire early, so this bound holds however loaded the
	// machine: the write was not cut off before the grace's end (it once
	// was, a quarter second sooner, when the handlers' half of the grace
	// ended).
	store.mu.Lock()
	cut := store.cut
	store.mu.Unlock()
	if graceEnd := deadline.Add(500 * time.Millisecond); cut.Before(graceEnd) {
		t.Fatalf("the retry's write was cut off at %s, before the grace's end %s",
			cut.Format("15:04:05.000"), graceEnd.Format("15:04:05.000"))
	}
	if j, err := mem.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRunning || j.Attempt != 1 {
		t.Fatalf("after the stop: %+v %v, want the job still running, attempt 1", j, err)
	}
	// Rescue (a leader's maintenance, here called directly) returns it
	// once its lease has ended, with the attempt counted.
	limit := time.Now().Add(15 * time.Second)
	for {
		if time.Now().After(limit) {
			t.Fatal("the job was not rescued 15 s after its lease ended")
		}
		if _, err := mem.JobRescue(ctx, &backend.JobRescueParams{}); err != nil {
			t.Fatal(err)
		}
		j, err := mem.JobGet(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == backend.StateRunning {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if j.State != backend.StateRetryable || j.Attempt != 1 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "lease expired") {
			t.Fatalf("rescued: state %s attempt %d errors %+v, want retryable, attempt 1, lease expired", j.State, j.Attempt, j.Errors)
		}
		break
	}
}

// heldClaims wraps a store whose claims after the first wait until release
// is closed: a claim stuck in flight.
type heldClaims struct {
	backend.Backend
	claims  atomic.Int32
	holding chan struct{} // closed as the first held claim is sent
	claimed chan struct{} // closed once that claim has returned
	once    sync.Once
	release chan struct{}
}

func (h *heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if h.claims.Add(1) > 1 {
		first := false
		h.once.Do(func() { close(h.holding); first = true })
		<-h.release
		if first {
			rows, err := h.Backend.JobClaim(ctx, p)
			close(h.claimed)
			return rows, err
		}
	}
	return h.Backend.JobClaim(ctx, p)
}

// stopWhileClaiming starts a one-worker client on store (leases of lease,
// the default when 0) whose handler holds its job until its context ends,
// inserts a first job and, once it runs, a second, so that a claim goes
// out and held holds it; then it stops the client with 20 ms to spare. It
// returns the two jobs' insert results and the stop's error.
func stopWhileClaiming(t *testing.T, ctx context.Context, store backend.Backend, held *heldClaims, lease time.Duration) (first, second *spool.InsertResult, err error) {
	t.Helper()
	started := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	client := oneWorkerClient(t, store, ws, lease)
	if first, err = client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	if second, err = client.Insert(ctx, WelcomeEmail{To: "b@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	<-held.holding
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	return first, second, client.Stop(sctx)
}

// TestStopOutOfTimeWithClaimInFlight: a stop whose producer is held past
// the grace by a claim in flight, with no handler stuck and every outcome
// written, names that claim (its queue, its id, the jobs it may hold): the
// claim may commit after the stop returned, leasing jobs to a client that
// is gone until their leases end. It once returned the bare context error,
// which says that nothing stays leased.
func TestStopOutOfTimeWithClaimInFlight(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &heldClaims{Backend: mem, holding: make(chan struct{}), claimed: make(chan struct{}), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(store.release)
		}
	}()
	res, b, err := stopWhileClaiming(t, ctx, store, store, 0)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError matching context.DeadlineExceeded", err, err)
	}
	// One worker, prefetching one: the claim sent while the first job ran
	// asked for one job.
	if len(se.Jobs) != 0 || len(se.Unwritten) != 0 || len(se.Claims) != 1 {
		t.Fatalf("stop = %v: stuck %+v, unwritten %v, claims %+v; want the claim in flight alone", err, se.Jobs, se.Unwritten, se.Claims)
	}
	c := se.Claims[0]
	if c.Queue != spool.DefaultQueue || c.Max != 1 || !c.InFlight || c.ID == "" {
		t.Fatalf("claim %+v, want one in flight on queue %q for up to 1 job", c, spool.DefaultQueue)
	}
	for _, want := range []string{"1 claim(s) whose jobs are unknown", "claim " + c.ID + ` of queue "default" (in flight, its reply never came: up to 1 job(s), released when it comes)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
	if j, err := mem.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRetryable || j.Attempt != 1 {
		t.Fatalf("after the stop: %+v %v, want the job retryable, attempt 1", j, err)
	}
	// The claim commits after the stop returned, leasing the job it takes
	// under the id the error named (TestStopReleasesALateClaim follows it).
	close(store.release)
	released = true
	<-store.claimed
	if j, err := mem.JobGet(ctx, b.ID); err != nil || j.State == backend.StateRunning && j.LeasedBy != c.ID {
		t.Fatalf("after the claim committed: %+v %v, want job %d leased by %s, or released", j, err, b.ID, c.ID)
	}
}

// releaseSeen wraps a store and hands each claim release it wrote (the
// claim's id) to released.
type releaseSeen struct {
	*heldClaims
	released chan string
}

func (r *releaseSeen) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	n, err := r.heldClaims.JobReleaseClaim(ctx, p)
	if err == nil {
		r.released <- p.ClaimID
	}
	return n, err
}

// TestStopReleasesALateClaim: a claim in flight when the stop gave up is
// named in its error; when the claim's reply comes, after Stop returned,
// the client releases the jobs it took by the claim's id, so they go back
// to the queue at once instead of waiting out their leases, and the
// goroutine that waited for the reply exits. Against main the job stayed
// running under the claim's id until its lease ended (the reply was read
// by no one), and the release never came.
func TestStopReleasesALateClaim(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	held := &heldClaims{Backend: mem, holding: make(chan struct{}), claimed: make(chan struct{}), release: make(chan struct{})}
	store := &releaseSeen{heldClaims: held, released: make(chan string, 4)}
	released := false
	defer func() {
		if !released {
			close(held.release)
		}
	}()
	_, b, err := stopWhileClaiming(t, ctx, store, held, time.Hour)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || len(se.Claims) != 1 || !se.Claims[0].InFlight {
		t.Fatalf("stop = %v, want a *StopTimeoutError naming the claim in flight", err)
	}
	id := se.Claims[0].ID
	close(held.release)
	released = true
	<-held.claimed
	// The lease is an hour: the job is back only if the client released it.
	guard := time.NewTimer(time.Minute)
	defer guard.Stop()
	select {
	case got := <-store.released:
		if got != id {
			t.Fatalf("released claim %s, want %s", got, id)
		}
	case <-guard.C:
		j, err := mem.JobGet(ctx, b.ID)
		t.Fatalf("no release of claim %s within a minute of its reply: job %d is %+v %v (leased until its lease ends)", id, b.ID, j, err)
	}
	if j, err := mem.JobGet(ctx, b.ID); err != nil || j.State != backend.StateAvailable || j.Attempt != 0 {
		t.Fatalf("after the late claim's release: %+v %v, want job %d available, attempt 0", j, err, b.ID)
	}
	// Nothing of the client waits on: the fetcher that read the reply
	// exited once the release returned.
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "engine.(*producer)") {
			break
		}
		select {
		case <-guard.C:
			t.Fatalf("a producer goroutine still runs a minute after the late claim's release:\n%s", stacks)
		case <-time.After(10 * time.Millisecond): // a look at the goroutines, not a synchronisation
		}
	}
}

// failedReleases wraps a store whose first claim commits but reports a
// failure, as a reply lost on the way would, and whose releases of claims
// fail: the claim's jobs stay leased to the client, and no release of them
// is written.
type failedReleases struct {
	backend.Backend
	claims atomic.Int32
	lost   chan string // the lost claim's id
}

func (f *failedReleases) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := f.Backend.JobClaim(ctx, p)
	if err == nil && f.claims.Add(1) == 1 {
		f.lost <- p.ClaimID
		return nil, errors.New("connection reset (the claim committed)")
	}
	return rows, err
}

var errReleaseRefused = errors.New("release refused")

func (f *failedReleases) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	return 0, errReleaseRefused
}

// TestStopReportsUnreleasedClaims: a stop with all the time it needs whose
// last release of a claim whose reply was lost fails returns a
// *StopUnreleasedError naming that claim (its jobs stay leased to the
// client until their leases end), not nil, which says that nothing stays
// leased. Against main it returned nil, with a log line.
func TestStopReportsUnreleasedClaims(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &failedReleases{Backend: mem, lost: make(chan string, 1)}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error { return nil }))
	client := oneWorkerClient(t, store, ws, 0)
	res, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := <-store.lost
	err = client.Stop(ctx)
	var ue *spool.StopUnreleasedError
	if !errors.As(err, &ue) || !errors.Is(err, errReleaseRefused) {
		t.Fatalf("stop = %v (%T), want a *StopUnreleasedError matching the release's error", err, err)
	}
	// One worker, prefetching one: the claim asked for two.
	if len(ue.Claims) != 1 || ue.Claims[0] != (spool.StopClaim{Queue: spool.DefaultQueue, ID: id, Max: 2}) {
		t.Fatalf("claims %+v, want claim %s of %q for up to 2 jobs", ue.Claims, id, spool.DefaultQueue)
	}
	want := fmt.Sprintf(`stop client: could not release 1 claim(s) whose reply was lost; their jobs stay leased to this client until their leases end: claim %s of queue "default" (up to 2 job(s)): release refused`, id)
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if j, err := mem.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRunning || j.LeasedBy != id {
		t.Fatalf("after the stop: %+v %v, want the job running, leased by %s", j, err, id)
	}
}

// blockedWrites wraps a store whose outcome writes hang until their context
// ends, as on a store too slow to take them; writing is closed as the first
// begins.
type blockedWrites struct {
	backend.Backend
	writing chan struct{}
	once    sync.Once
}

func (b *blockedWrites) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	b.once.Do(func() { close(b.writing) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStopNamesJobsOfAProducerHeldUp: a stop whose outcome writes hang
// fills the outcome writer's queue, so the producer, handing its buffered
// jobs back, blocks and does not exit in time. The stop's error names every
// job still leased to the client: the releases it gave up writing, the
// releases the producer never handed over and the running job's outcome,
// which the closed writer refused. It once named only the outcomes the
// writer had taken.
func TestStopNamesJobsOfAProducerHeldUp(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &blockedWrites{Backend: mem, writing: make(chan struct{})}
	started := make(chan struct{})
	var once sync.Once
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}))
	// One outcome a write and a queue of four: the writer takes five
	// outcomes at most while its write hangs, fewer than the nine jobs'.
	client, err := spool.NewClient(store, &spool.Config{
		Workers:            ws,
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1, Prefetch: 8}},
		CompletionBatchMax: 1,
		Logger:             quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 9 {
		res, err := client.Insert(ctx, WelcomeEmail{To: fmt.Sprintf("%d@example.com", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	go func() {
		<-store.writing
		cancel()
	}()
	err = client.StopAndCancel(sctx)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || !errors.Is(err, context.Canceled) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError matching context.Canceled", err, err)
	}
	// The running job's handler returns at once when cancelled; if the
	// machine is so slow that it had not yet when the stop gave up, the
	// stop names it stuck too, and its retry, whose write hangs, unwritten.
	if len(se.Jobs) > 1 || len(se.Jobs) == 1 && se.Jobs[0].ID != ids[0] || len(se.Claims) != 0 || !slices.Equal(se.Unwritten, ids) {
		t.Fatalf("stuck %+v, claims %+v, unwritten %v; want every job unwritten, %v", se.Jobs, se.Claims, se.Unwritten, ids)
	}
	for _, id := range ids {
		if j, err := mem.JobGet(ctx, id); err != nil || j.State != backend.StateRunning {
			t.Fatalf("job %d after the stop: %+v %v, want running (leased until rescue)", id, j, err)
		}
	}
}

// lostReply wraps a store whose first claim commits but reports a failure,
// as a reply lost on the way would, and whose releases of claims wait until
// release is closed (their context ignored): the claim's jobs stay leased
// to the client, and the producer cannot release them in time.
type lostReply struct {
	backend.Backend
	claims   atomic.Int32
	lost     chan string // the lost claim's id
	releases chan struct{}
}

func (l *lostReply) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := l.Backend.JobClaim(ctx, p)
	if err == nil && l.claims.Add(1) == 1 {
		l.lost <- p.ClaimID
		return nil, errors.New("connection reset (the claim committed)")
	}
	return rows, err
}

func (l *lostReply) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	<-l.releases
	return l.Backend.JobReleaseClaim(ctx, p)
}

// TestStopNamesLostClaims: a claim whose reply was lost (it committed)
// leaves its jobs leased to the client; a stop that runs out of time
// before their release is written names that claim, as not in flight,
// with the most jobs it may hold, and the jobs stay leased under its id.
func TestStopNamesLostClaims(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &lostReply{Backend: mem, lost: make(chan string, 1), releases: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(store.releases)
		}
	}()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error { return nil }))
	client := oneWorkerClient(t, store, ws, 0)
	res, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := <-store.lost
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = client.Stop(sctx)
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError matching context.DeadlineExceeded", err, err)
	}
	// The producer may have begun its retry, whose claim waits for the
	// release: a claim in flight then, named too.
	var found bool
	for _, c := range se.Claims {
		switch {
		case c.ID == id:
			found = true
			// One worker, prefetching one: the first claim asked for two.
			if c.InFlight || c.Max != 2 || c.Queue != spool.DefaultQueue {
				t.Errorf("lost claim %+v, want not in flight, up to 2 jobs of %q", c, spool.DefaultQueue)
			}
		case !c.InFlight:
			t.Errorf("claim %+v named as lost, want only %s", c, id)
		}
	}
	if !found || len(se.Jobs) != 0 || len(se.Unwritten) != 0 {
		t.Fatalf("stop = %v: stuck %+v, unwritten %v, claims %+v; want the lost claim %s named", err, se.Jobs, se.Unwritten, se.Claims, id)
	}
	if j, err := mem.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRunning || j.LeasedBy != id {
		t.Fatalf("after the stop: %+v %v, want the job running, leased by %s", j, err, id)
	}
	close(store.releases)
	released = true
}
