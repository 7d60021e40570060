package spool_test

import (
	"context"
	"errors"
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
	once    sync.Once
	release chan struct{}
}

func (h *heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if h.claims.Add(1) > 1 {
		h.once.Do(func() { close(h.holding) })
		<-h.release
	}
	return h.Backend.JobClaim(ctx, p)
}

// TestStopOutOfTimeWithClaimInFlight: a stop whose producer is held past the
// handlers' half of the grace by a claim in flight, with no handler stuck
// and every outcome written, has nothing to name: it returns the context's
// error alone, not an empty *StopTimeoutError.
func TestStopOutOfTimeWithClaimInFlight(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	store := &heldClaims{Backend: mem, holding: make(chan struct{}), release: make(chan struct{})}
	defer close(store.release)
	started := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}))
	client := oneWorkerClient(t, store, ws, 0)
	res, err := client.Insert(ctx, WelcomeEmail{To: "a@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := client.Insert(ctx, WelcomeEmail{To: "b@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	<-store.holding
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = client.Stop(sctx)
	var se *spool.StopTimeoutError
	if errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v (%T), want the bare context.DeadlineExceeded", err, err)
	}
	if j, err := mem.JobGet(ctx, res.ID); err != nil || j.State != backend.StateRetryable || j.Attempt != 1 {
		t.Fatalf("after the stop: %+v %v, want the job retryable, attempt 1", j, err)
	}
}
