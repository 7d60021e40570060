package spool_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/backendtest"
	"github.com/spoolq/spool/backend/memory"
)

// slowBeatBackend answers every heartbeat after delay, or with the
// caller's context error if that ends first, and counts the beats that
// extended leases.
type slowBeatBackend struct {
	*memory.Backend
	delay    time.Duration
	extended atomic.Int64
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
	var logs backendtest.LogBuffer
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}},
		LeaseDuration:  lease,
		PollInterval:   20 * time.Millisecond,
		RescueInterval: 20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
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
