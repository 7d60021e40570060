package shard_test

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
	"github.com/spoolq/spool/backend/shard"
)

// errUnreachable is what a downShard's calls return while it is down.
var errUnreachable = errors.New("shard unreachable (test)")

// downShard is a shard that can be made unreachable: while down is set,
// every call a client makes to it (elections, claims, outcomes, inserts,
// maintenance, listings) fails as it would with its server stopped.
type downShard struct {
	backend.Backend
	down *atomic.Bool
}

func (d downShard) fail(op string) error {
	if d.down.Load() {
		return fmt.Errorf("%s: %w", op, errUnreachable)
	}
	return nil
}

func (d downShard) LeaderElect(ctx context.Context, p *backend.LeaderElectParams) (bool, error) {
	if err := d.fail("elect"); err != nil {
		return false, err
	}
	return d.Backend.LeaderElect(ctx, p)
}

func (d downShard) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if err := d.fail("resign"); err != nil {
		return err
	}
	return d.Backend.LeaderResign(ctx, p)
}

func (d downShard) JobRescue(ctx context.Context, p *backend.JobRescueParams) (*backend.JobRescueResult, error) {
	if err := d.fail("rescue"); err != nil {
		return nil, err
	}
	return d.Backend.JobRescue(ctx, p)
}

func (d downShard) JobCleanup(ctx context.Context, p *backend.JobCleanupParams) (int, error) {
	if err := d.fail("cleanup"); err != nil {
		return 0, err
	}
	return d.Backend.JobCleanup(ctx, p)
}

func (d downShard) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	if err := d.fail("claim"); err != nil {
		return nil, err
	}
	return d.Backend.JobClaim(ctx, p)
}

func (d downShard) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	if err := d.fail("claim"); err != nil {
		return err
	}
	return d.Backend.JobClaimFlow(ctx, p, claim)
}

func (d downShard) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	if err := d.fail("insert"); err != nil {
		return nil, err
	}
	return d.Backend.JobInsertMany(ctx, p)
}

func (d downShard) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	if err := d.fail("finish"); err != nil {
		return nil, err
	}
	return d.Backend.JobFinishMany(ctx, p)
}

func (d downShard) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	if err := d.fail("heartbeat"); err != nil {
		return nil, err
	}
	return d.Backend.JobHeartbeatMany(ctx, p)
}

func (d downShard) JobReleaseClaim(ctx context.Context, p *backend.JobReleaseClaimParams) (int, error) {
	if err := d.fail("release"); err != nil {
		return 0, err
	}
	return d.Backend.JobReleaseClaim(ctx, p)
}

func (d downShard) JobList(ctx context.Context, p *backend.JobListParams) ([]*backend.JobRow, error) {
	if err := d.fail("list"); err != nil {
		return nil, err
	}
	return d.Backend.JobList(ctx, p)
}

func (d downShard) QueuePausedAll(ctx context.Context) ([]backend.PausedQueue, error) {
	if err := d.fail("paused queues"); err != nil {
		return nil, err
	}
	return d.Backend.QueuePausedAll(ctx)
}

// quietLogger drops the clients' logs: shard 0's failures are expected.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func getJob(t *testing.T, be backend.Backend, id int64) *backend.JobRow {
	t.Helper()
	j, err := be.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// tickArgs is the periodic job of TestLeadershipWithoutShardZero.
type tickArgs struct{}

func (tickArgs) Kind() string { return "tick" }

// With shard 0 unreachable, the clients still elect a leader, which
// rescues the jobs of the other shards and fires a periodic job (placed on
// shard 2) at every slot, exactly once per slot. Two clients, each with the
// periodic job, on three memory stores: the first leads alone (it holds
// every shard's election), the second starts, shard 0 goes down, and the
// leader stops, so that the second must take over without shard 0.
func TestLeadershipWithoutShardZero(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	stores := []*memory.Backend{memory.New(), memory.New(), memory.New()}
	opts := &shard.Options{Queues: map[string]int{"lost1": 1, "lost2": 2, "tick": 2}}
	open := func() *shard.Backend {
		be, err := shard.New([]backend.Backend{downShard{stores[0].Reopen(), &down}, stores[1].Reopen(), stores[2].Reopen()}, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	const every = time.Second
	cfg := func() *spool.Config {
		ws := spool.NewWorkers()
		spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[noteArgs]) error { return nil }))
		return &spool.Config{
			Workers: ws,
			Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
			// A leader's term is 5 s (the least): each client elects
			// every 1.7 s.
			LeaseDuration:  time.Second,
			RescueInterval: 50 * time.Millisecond,
			PollInterval:   50 * time.Millisecond,
			// The queue "tick" has no workers: its jobs stay, one per
			// slot, to be counted.
			AllowUnknownKinds: true,
			PeriodicJobs: []spool.PeriodicJob{{Name: "tick", Schedule: spool.Every(every),
				Args: func(time.Time) spool.JobArgs { return tickArgs{} }, Opts: &spool.InsertOpts{Queue: "tick"}}},
			Logger: quietLogger(),
		}
	}
	be := open()
	startClient := func() *spool.Client {
		c, err := spool.NewClient(open(), cfg())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Stop(ctx); err != nil && !errors.Is(err, spool.ErrNotStarted) {
				t.Errorf("stop: %v", err)
			}
		})
		return c
	}
	ticks := func() []*backend.JobRow {
		t.Helper()
		rows, err := stores[2].JobList(ctx, &backend.JobListParams{Queue: "tick", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// waitFor polls the stores (up to 15 s) until cond holds.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	leader := startClient()
	waitFor("the first client to lead and fire the periodic job", func() bool { return len(ticks()) > 0 })
	startClient()
	down.Store(true)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := leader.Stop(stopCtx); err != nil {
		t.Fatalf("stop the leader: %v", err)
	}
	downAt := time.Now()
	// A worker on each shard still up claims a job and dies with it.
	var lost []int64
	for _, q := range []string{"lost1", "lost2"} {
		id := insertJobs(t, be, job(q, ""))[0]
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: q, Max: 1, Lease: 300 * time.Millisecond, ClaimID: "dead-worker"})
		if err != nil || len(rows) != 1 || rows[0].ID != id {
			t.Fatalf("claim as the dead worker on queue %s: %d rows, %v", q, len(rows), err)
		}
		lost = append(lost, id)
	}
	for _, id := range lost {
		waitFor(fmt.Sprintf("job %d (shard %d) to be rescued", id, shard.JobShard(id)), func() bool {
			return getJob(t, be, id).State != backend.StateRunning
		})
		if j := getJob(t, be, id); j.State != backend.StateRetryable || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "lease expired") {
			t.Fatalf("rescued job %d: state %s, errors %+v", id, j.State, j.Errors)
		}
	}
	// Slots keep coming well past an election round (a third of the
	// 5 s term) after the leader stopped.
	past := downAt.Add(3 * time.Second)
	waitFor("slots fired with shard 0 down", func() bool {
		for _, j := range ticks() {
			if j.RunAt.After(past) {
				return true
			}
		}
		return false
	})
	// Every slot from the first fired to the last has one job.
	slots := map[time.Time]int{}
	var first, last time.Time
	for _, j := range ticks() {
		at := j.RunAt.UTC()
		slots[at]++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	for at := first; !at.After(last); at = at.Add(every) {
		if slots[at] != 1 {
			t.Fatalf("slot %s has %d jobs, want 1 (slots %s to %s, leader stopped with shard 0 down at %s)", at.Format(time.RFC3339Nano), slots[at], first, last, downAt)
		}
	}
	if n := len(slots); n != int(last.Sub(first)/every)+1 {
		t.Fatalf("%d slots fired from %s to %s: some are not on the schedule", n, first, last)
	}
}

// hangingElections is a shard whose elections never answer (a server that
// stopped answering without closing connections) until their context ends.
type hangingElections struct{ backend.Backend }

func (hangingElections) LeaderElect(ctx context.Context, _ *backend.LeaderElectParams) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// The whole backend's leader is the holder of the lowest shard whose
// election answers: shard 0 while it answers, even when another client
// holds shard 1; the holder of shard 1 while shard 0 fails or hangs, and
// shard 0's again once it is back; no one when every shard fails.
func TestLeaderElectLowestAnswering(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	s0, s1 := memory.New(), memory.New()
	be, err := shard.New([]backend.Backend{downShard{s0, &down}, s1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	elect := func(id string) (bool, error) {
		return be.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: id, TTL: time.Minute})
	}
	// b holds shard 1 alone; a holds shard 0.
	if ok, err := s1.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: "b", TTL: time.Minute}); !ok || err != nil {
		t.Fatalf("b on shard 1: %v %v", ok, err)
	}
	if ok, err := elect("a"); !ok || err != nil {
		t.Fatalf("a, holding shard 0: leads %v, %v; want to lead", ok, err)
	}
	if ok, err := elect("b"); ok || err != nil {
		t.Fatalf("b, holding shard 1 only: leads %v, %v; want not to lead while shard 0 answers", ok, err)
	}
	down.Store(true)
	if ok, err := elect("b"); !ok || err != nil {
		t.Fatalf("b, holding shard 1, shard 0 down: leads %v, %v; want to lead", ok, err)
	}
	if ok, err := elect("a"); ok || err != nil {
		t.Fatalf("a, shard 0 down and shard 1 held by b: leads %v, %v; want not to lead", ok, err)
	}
	// Shard 0 back: its holder leads again, and b no longer.
	down.Store(false)
	if ok, err := elect("a"); !ok || err != nil {
		t.Fatalf("a, holding shard 0 again: leads %v, %v; want to lead", ok, err)
	}
	if ok, err := elect("b"); ok || err != nil {
		t.Fatalf("b, shard 0 back: leads %v, %v; want not to lead", ok, err)
	}
	down.Store(true)
	both, err := shard.New([]backend.Backend{downShard{memory.New(), &down}, downShard{memory.New(), &down}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = both.Close() })
	if ok, err := both.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: "a", TTL: time.Minute}); ok || !errors.Is(err, errUnreachable) {
		t.Fatalf("every shard down: leads %v, %v; want the shards' failure", ok, err)
	}

	// A shard 0 that hangs counts as not answering after half the term.
	hung, err := shard.New([]backend.Backend{hangingElections{memory.New()}, memory.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Close() })
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	began := time.Now()
	ok, err := hung.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: "a", TTL: 4 * time.Second})
	if !ok || err != nil {
		t.Fatalf("shard 0 hanging: leads %v, %v after %s; want to lead by shard 1 after half the 4 s term", ok, err, time.Since(began))
	}
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("the election gave up on shard 0 after %s, before half the 4 s term", took)
	}
}

// With a shard down, rescue and cleanup still do the other shards' work,
// report it, and say that the failure is that shard's alone.
func TestMaintenanceWithShardDown(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	be, err := shard.New([]backend.Backend{downShard{memory.New(), &down}, memory.New(), memory.New()},
		&shard.Options{Queues: map[string]int{"q1": 1, "q2": 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	for _, q := range []string{"q1", "q2"} {
		insertJobs(t, be, job(q, ""))
		if rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: q, Max: 1, Lease: 50 * time.Millisecond, ClaimID: "dead-worker"}); err != nil || len(rows) != 1 {
			t.Fatalf("claim on %s: %d rows, %v", q, len(rows), err)
		}
	}
	down.Store(true)
	retried := 0
	deadline := time.Now().Add(15 * time.Second)
	for retried < 2 {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if !errors.Is(err, errUnreachable) || res == nil {
			t.Fatalf("rescue with shard 0 down: %+v, %v; want the other shards' result and shard 0's failure", res, err)
		}
		retried += res.Retried
		if res.Retried > 0 {
			if want := fmt.Sprintf("rescue: 1 of 3 shards failed, the others done (%d retried, 0 discarded): shard 0: ", res.Retried); !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("rescue's error %q, want it to start %q", err, want)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 jobs rescued on shards 1 and 2 in 15 s", retried)
		}
		time.Sleep(5 * time.Millisecond)
	}
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Hour, Max: 10})
	if want := "cleanup: 1 of 3 shards failed, the others done (0 deleted): shard 0: "; n != 0 || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("cleanup with shard 0 down: %d, %v; want an error starting %q", n, err, want)
	}
}
