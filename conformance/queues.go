package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testPauseStopsClaims: a paused queue yields nothing to claims, from this
// handle and from another one on the same store (as another process), while
// other queues are claimed as usual; the pause is listed, idempotent, and
// undone by resume. A queue name that can never exist is refused and
// changes nothing.
func testPauseStopsClaims(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	other := h.Reopen(t, be)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	claim := func(be backend.Backend, queue string) []*backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, Max: 10, Lease: time.Minute, ClaimID: "t"})
		if err != nil {
			t.Fatalf("claim %s: %v", queue, err)
		}
		return rows
	}
	paused := func(be backend.Backend) []string {
		t.Helper()
		qs, err := be.QueuePausedAll(ctx)
		if err != nil {
			t.Fatalf("paused queues: %v", err)
		}
		var names []string
		for _, q := range qs {
			if q.Since.IsZero() || time.Since(q.Since).Abs() > time.Minute {
				t.Errorf("queue %s paused since %v, want about now", q.Queue, q.Since)
			}
			names = append(names, q.Queue)
		}
		return names
	}

	before := time.Now()
	if err := c.QueuePause(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueuePause(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "a"})
		insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "b"})
	}
	if rows := claim(be, "a"); len(rows) != 0 {
		t.Fatalf("claimed %v from a paused queue", rowIDs(rows))
	}
	if rows := claim(other, "a"); len(rows) != 0 {
		t.Fatalf("another handle claimed %v from a paused queue", rowIDs(rows))
	}
	if rows := claim(be, "b"); len(rows) != 3 {
		t.Fatalf("claimed %d of the 3 jobs of queue b, which is not paused", len(rows))
	}
	if got := paused(other); !slices.Equal(got, []string{"a", "empty"}) {
		t.Fatalf("paused queues %v, want [a empty]", got)
	}
	// Pausing again keeps the first pause's time; resuming twice is fine.
	qs, _ := be.QueuePausedAll(ctx)
	first := qs[0].Since
	if err := c.QueuePause(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if qs, _ := be.QueuePausedAll(ctx); len(qs) != 2 || !qs[0].Since.Equal(first) || first.Before(before.Add(-time.Minute)) {
		t.Fatalf("paused again: %+v, want a still paused since %v", qs, first)
	}
	if err := c.QueuePause(ctx, ""); !errors.Is(err, spool.ErrInvalidJob) {
		t.Fatalf("pause of queue \"\": %v, want ErrInvalidJob", err)
	}
	if err := c.QueuePause(ctx, "-x"); !errors.Is(err, spool.ErrInvalidJob) {
		t.Fatalf("pause of queue \"-x\": %v, want ErrInvalidJob", err)
	}
	if got := paused(be); !slices.Equal(got, []string{"a", "empty"}) {
		t.Fatalf("a refused pause changed the paused queues: %v", got)
	}
	for range 2 {
		if err := c.QueueResume(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if got := paused(be); !slices.Equal(got, []string{"empty"}) {
		t.Fatalf("paused queues after resume %v, want [empty]", got)
	}
	if rows := claim(other, "a"); len(rows) != 3 {
		t.Fatalf("claimed %d of the 3 jobs of resumed queue a", len(rows))
	}
}

// testPauseRunningClient: a running client stops starting jobs of a queue
// paused from elsewhere, while the job it was running finishes; resumed, the
// waiting jobs run. Where the backend pushes wake-ups, the client polls only
// once a minute: the resume has to reach it as a wake-up.
func testPauseRunningClient(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	admin := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	ws, started, release := blockingWorkers()
	cfg := fastConfig(ws, 4)
	if _, ok := be.(backend.Notifier); ok {
		cfg.PollInterval = time.Minute
	}
	c := newClient(t, be, cfg)
	start(t, c)

	blocking := insert(t, admin, NoteArgs{N: -1, Mode: "block"}, nil)
	if n := recv(t, started, "the blocking job to start"); n != -1 {
		t.Fatalf("job %d started, want the blocking one", n)
	}
	if err := admin.QueuePause(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	var waiting []int64
	for i := range 3 {
		waiting = append(waiting, insert(t, admin, NoteArgs{N: i}, nil))
	}
	close(release)
	waitState(t, be, blocking, backend.StateCompleted)
	// The inserts woke the client (or it polled); it claimed nothing. Give it
	// time for many claims before looking.
	time.Sleep(300 * time.Millisecond)
	select {
	case n := <-started:
		t.Fatalf("job %d of the paused queue started", n)
	default:
	}
	for _, id := range waiting {
		if j := getJob(t, be, id); j.State != backend.StateAvailable {
			t.Fatalf("job %d of the paused queue is %s, want available", id, j.State)
		}
	}
	resumed := time.Now()
	if err := admin.QueueResume(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for _, id := range waiting {
		waitState(t, be, id, backend.StateCompleted)
	}
	if _, ok := be.(backend.Notifier); ok {
		if d := time.Since(resumed); d > 5*time.Second {
			t.Fatalf("the resumed jobs took %s to run; the client polls once a minute, so the resume did not wake it", d)
		}
	}
}

// testPauseReleasesPrefetched: jobs a client claimed into its prefetch
// buffer before their queue was paused by another process go back to the
// queue unstarted, with their attempt given back, within a couple of polls;
// the running job finishes; after the resume they all run.
func testPauseReleasesPrefetched(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	admin := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	ws, started, release := blockingWorkers()
	cfg := fastConfig(ws, 1)
	cfg.Queues = map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1, Prefetch: 5}}
	// A long lease: buffered jobs are not handed back as stale (after half
	// a lease) before the test looks.
	cfg.LeaseDuration, cfg.RescueInterval = time.Minute, time.Minute
	c := newClient(t, be, cfg)
	blocking := insert(t, admin, NoteArgs{N: -1, Mode: "block"}, nil)
	var buffered []int64
	for i := range 5 {
		buffered = append(buffered, insert(t, admin, NoteArgs{N: i}, nil))
	}
	start(t, c)
	if n := recv(t, started, "the blocking job to start"); n != -1 {
		t.Fatalf("job %d started first, want the blocking one", n)
	}
	// All six are claimed: one running, five in the buffer.
	for _, id := range buffered {
		waitState(t, be, id, backend.StateRunning)
	}
	paused := time.Now()
	if err := admin.QueuePause(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for _, id := range buffered {
		if j := waitState(t, be, id, backend.StateAvailable); j.Attempt != 0 {
			t.Fatalf("job %d handed back with attempt %d, want 0", id, j.Attempt)
		}
	}
	// Only the pause's release can have sent them back this soon: their
	// leases last a minute and rescue looks once a minute. How soon within
	// that is the machine's load, not the contract.
	if d := time.Since(paused); d >= cfg.LeaseDuration {
		t.Fatalf("the buffered jobs went back %v after the pause, as late as their leases could end: the pause did not release them", d)
	}
	close(release)
	waitState(t, be, blocking, backend.StateCompleted)
	select {
	case n := <-started:
		t.Fatalf("job %d of the paused queue started", n)
	default:
	}
	if err := admin.QueueResume(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for _, id := range buffered {
		waitState(t, be, id, backend.StateCompleted)
	}
}

// blockingWorkers registers a NoteArgs worker that sends each job's N on
// started as it starts and holds jobs of mode "block" until release is
// closed (or their context ends).
func blockingWorkers() (ws *spool.Workers, started chan int, release chan struct{}) {
	started, release = make(chan int, 16), make(chan struct{})
	ws = spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.Args.N
		if j.Args.Mode == "block" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	return ws, started, release
}
