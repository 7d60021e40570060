package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// slowBeatBackend answers every heartbeat after delay, or with the
// caller's context error if that ends first, and counts the beats that
// extended leases.
type slowBeatBackend struct {
	*memory.Backend
	delay    time.Duration
	extended atomic.Int64
	// claimDelay, when set, holds every claim that long before the store
	// takes it, so that the store's lease starts that much after the
	// claim was sent.
	claimDelay time.Duration
}

func (s *slowBeatBackend) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if s.claimDelay > 0 {
		select {
		case <-time.After(s.claimDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Backend.JobClaim(ctx, p)
}

func (s *slowBeatBackend) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res, err := s.Backend.JobHeartbeatMany(ctx, p)
	if err == nil {
		s.extended.Add(1)
	}
	return res, err
}

// startLongJob starts a client over be with two workers, a lease of lease
// and quick rescues, that logs its warnings to the buffer returned, and
// inserts one longArgs job.
func startLongJob(t *testing.T, be backend.Backend, ws *spool.Workers, lease time.Duration) (*spool.Client, *conformance.LogBuffer) {
	t.Helper()
	ctx := context.Background()
	logs := &conformance.LogBuffer{}
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}},
		LeaseDuration:  lease,
		PollInterval:   20 * time.Millisecond,
		RescueInterval: 20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, longArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c, logs
}

type longArgs struct{}

func (longArgs) Kind() string { return "long_test" }

// TestSlowHeartbeatKeepsLease: a heartbeat that takes longer than the
// interval between beats (a third of the lease) but returns well before the
// lease ends still extends it. Cut off at the interval, every such beat
// failed, the lease of a job that outlived it ended, and rescue handed the
// job to a second run while the first still ran.
func TestSlowHeartbeatKeepsLease(t *testing.T) {
	ctx := context.Background()
	inner := migratedMemory(t)
	const lease = 600 * time.Millisecond
	be := &slowBeatBackend{Backend: inner, delay: lease / 2} // 1.5 beat intervals
	var runs atomic.Int64
	finished := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[longArgs]) error {
		if runs.Add(1) > 1 {
			return nil
		}
		defer close(finished)
		select {
		case <-time.After(3 * lease):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	c, logs := startLongJob(t, be, ws, lease)
	defer func() { _ = c.Stop(ctx) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the job's first run did not end")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the job ran %d times; warnings:\n%s", n, logs.String())
	}
	if be.extended.Load() == 0 {
		t.Errorf("no heartbeat extended the lease; warnings:\n%s", logs.String())
	}
	if out := logs.String(); strings.Contains(out, "heartbeat failed") {
		t.Errorf("a heartbeat slower than its interval was given up:\n%s", out)
	}
}

// TestLeaseEndCancelsHandler: when no heartbeat lands within the lease (the
// database answers none in time), the handler is cancelled as its lease
// ends, with ErrLeaseLost, before rescue can give the job to its next run.
// The store starts each lease 150 ms after its claim was sent (a claim's
// round trip), the margin by which the client's estimate of the lease's
// end comes first.
func TestLeaseEndCancelsHandler(t *testing.T) {
	ctx := context.Background()
	inner := migratedMemory(t)
	const lease = 600 * time.Millisecond
	be := &slowBeatBackend{Backend: inner, delay: time.Hour, claimDelay: 150 * time.Millisecond} // no beat lands
	var (
		starts   atomic.Int64
		firstCtx atomic.Pointer[context.Context]
		stillRan atomic.Bool
	)
	causes := make(chan error, 1)
	second := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[longArgs]) error {
		if starts.Add(1) > 1 {
			if first := firstCtx.Load(); first == nil || (*first).Err() == nil {
				stillRan.Store(true)
			}
			close(second)
			return nil
		}
		firstCtx.Store(&ctx)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		case <-time.After(10 * lease):
			causes <- nil
			return nil
		}
	}))
	c, logs := startLongJob(t, be, ws, lease)
	defer func() { _ = c.Stop(ctx) }()
	if cause := <-causes; !errors.Is(cause, spool.ErrLeaseLost) {
		t.Fatalf("the first run ended with cause %v, want ErrLeaseLost; warnings:\n%s", cause, logs.String())
	}
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job was not run again after its lease ended; warnings:\n%s", logs.String())
	}
	if stillRan.Load() {
		t.Error("the job's second run started before its first run's context was cancelled")
	}
	if out := logs.String(); !strings.Contains(out, "leases ended before a heartbeat could extend them") {
		t.Errorf("no warning says why the handler was cancelled:\n%s", out)
	}
}

// finishSpy is a slowBeatBackend that sends every outcome it is asked to
// write to finishes.
type finishSpy struct {
	*slowBeatBackend
	finishes chan backend.JobFinish
}

func (s *finishSpy) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	for _, f := range p.Finishes {
		s.finishes <- f
	}
	return s.slowBeatBackend.JobFinishMany(ctx, p)
}

// TestLeaseEndRetriesAtOnce: a handler cut off because its lease ended (no
// heartbeat landed: the process was paused or the database unreachable)
// that returns the error it was cut off with has not failed on its own, so
// its retry is due at once, as a rescue's would be, not after the retry
// policy's backoff (attempt⁴ seconds: a job rescued twice before would
// wait 81 s). No rescue runs here, so the store still holds the lease and
// applies the outcome: the job is run again.
func TestLeaseEndRetriesAtOnce(t *testing.T) {
	ctx := context.Background()
	const lease = 400 * time.Millisecond
	be := &finishSpy{
		slowBeatBackend: &slowBeatBackend{Backend: migratedMemory(t), delay: time.Hour}, // no beat lands
		finishes:        make(chan backend.JobFinish, 10),
	}
	var runs atomic.Int64
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[longArgs]) error {
		if runs.Add(1) > 1 {
			return nil
		}
		<-ctx.Done()
		return fmt.Errorf("read the job's input: %w", ctx.Err())
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		LeaseDuration:  lease,
		PollInterval:   20 * time.Millisecond,
		RescueInterval: time.Hour,
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, longArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	f := <-be.finishes
	if f.Outcome != backend.OutcomeRetry || f.Delay != 0 {
		t.Fatalf("the run cut off by its lease's end wrote outcome %v with delay %v, want a retry due at once", f.Outcome, f.Delay)
	}
	if f.Error == nil || !strings.Contains(f.Error.Error, "no heartbeat reached the database within the lease") {
		t.Errorf("the retry's error %+v does not say the lease ended", f.Error)
	}
	if f = <-be.finishes; f.Outcome != backend.OutcomeComplete {
		t.Fatalf("the second run wrote outcome %v, want complete", f.Outcome)
	}
	j, err := c.JobGet(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != backend.StateCompleted || j.Attempt != 2 {
		t.Errorf("job %s at attempt %d, want completed at attempt 2", j.State, j.Attempt)
	}
}

// recordsHandler sends every log record to a channel.
type recordsHandler struct{ records chan<- slog.Record }

func (h recordsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}
func (h recordsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsHandler) WithGroup(string) slog.Handler      { return h }

// TestUserCancelIsNoWarning: a running job cancelled by JobCancel has its
// handler cancelled and says so at Info, naming the job: the caller asked
// for it, and a warning would send an operator looking for a fault.
func TestUserCancelIsNoWarning(t *testing.T) {
	ctx := context.Background()
	records := make(chan slog.Record, 100)
	started := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[longArgs]) error {
		started <- j.ID
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	c, err := spool.NewClient(migratedMemory(t), &spool.Config{
		Workers:       ws,
		Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		LeaseDuration: time.Minute, // no heartbeat (every 20 s) before the cancellation's wake-up
		Logger:        slog.New(recordsHandler{records}),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, longArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	<-started
	if _, err := c.JobCancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	hang := time.After(30 * time.Second)
	for {
		var r slog.Record
		select {
		case r = <-records:
		case <-hang:
			t.Fatal("no log record says the job was cancelled by a user within 30 s")
		}
		if r.Level >= slog.LevelWarn {
			t.Fatalf("logged at %s after a user's cancellation: %s", r.Level, r.Message)
		}
		if !strings.Contains(r.Message, "cancelled by a user") {
			continue
		}
		var ids any
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "job_ids" {
				ids = a.Value.Any()
			}
			return true
		})
		if got, ok := ids.([]int64); !ok || len(got) != 1 || got[0] != res.ID {
			t.Fatalf("job_ids = %v, want [%d]", ids, res.ID)
		}
		return
	}
}
