package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// ManyArgs is the args of the many-worker subjects: a group key and what
// the handler does with the job.
type ManyArgs struct {
	Group string `json:"group,omitempty"`
	Mode  string `json:"mode,omitempty"`
	N     int    `json:"n,omitempty"`
}

// Kind implements spool.JobArgs.
func (ManyArgs) Kind() string { return "many" }

// manyTests are the subjects of handlers that take many jobs per call
// (docs/many.md).
func manyTests() []namedTest {
	return []namedTest{
		{"ManyGroupsAndPerJobResults", testManyGroupsAndResults},
		{"ManyCompleteManyTx", testManyCompleteManyTx},
		{"ManyCancelOneJob", testManyCancelOne},
		{"ManyPanicAndTimeout", testManyPanicAndTimeout},
		{"ManyGatheredLeaseExtended", testManyGatheredLeaseExtended},
		{"ManyStopReleasesGathered", testManyStopReleasesGathered},
		{"ManyFlowLimit", testManyFlowLimit},
		{"ManyHardStopCancelsCall", testManyHardStop},
		{"ManyPauseReleasesGathered", testManyPauseReleasesGathered},
	}
}

// insertMany inserts args in one statement and returns their ids.
func insertMany(t *testing.T, c *spool.Client, args ...spool.JobArgs) []int64 {
	t.Helper()
	params := make([]spool.InsertManyParams, len(args))
	for i, a := range args {
		params[i] = spool.InsertManyParams{Args: a}
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert %d jobs: %v", len(args), err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// testManyGroupsAndResults: jobs inserted together are worked in calls of
// at most MaxJobs jobs of one group key; each job's result is its own
// (complete, retry, discard, snooze, cancel), as is its output, written
// through its own context.
func testManyGroupsAndResults(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var (
		mu    sync.Mutex
		calls [][]ManyArgs
		seen  = map[int64]int{} // runs per job
	)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		args := make([]ManyArgs, len(jobs))
		errs := spool.JobErrors{}
		for i, j := range jobs {
			args[i] = j.Args
			if err := spool.RecordOutput(spool.JobContext(ctx, j), map[string]int{"n": j.Args.N, "attempt": int(j.Attempt)}); err != nil {
				return fmt.Errorf("record output of job %d: %w", j.ID, err)
			}
			switch j.Args.Mode {
			case "retry":
				if j.Attempt == 1 {
					errs[j.ID] = errors.New("first attempt fails")
				}
			case "discard":
				errs[j.ID] = spool.Discard(errors.New("bad job"))
			case "cancel":
				errs[j.ID] = spool.Cancel(errors.New("not wanted"))
			case "snooze": // a snooze gives its attempt back: snoozed once by count
				mu.Lock()
				first := seen[j.ID] == 0
				mu.Unlock()
				if first {
					errs[j.ID] = spool.Snooze(10 * time.Millisecond)
				}
			}
		}
		if err := spool.RecordOutput(ctx, "the call's own context is no job's"); !errors.Is(err, spool.ErrNotInJob) {
			return fmt.Errorf("RecordOutput with the call's context: %v, want ErrNotInJob", err)
		}
		mu.Lock()
		calls = append(calls, args)
		for _, j := range jobs {
			seen[j.ID]++
		}
		mu.Unlock()
		return errs
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 4, MaxWait: 300 * time.Millisecond, GroupBy: func(a ManyArgs) string { return a.Group }})
	c := newClient(t, be, fastConfig(ws, 20))
	var args []spool.JobArgs
	modes := []string{"", "", "retry", "discard", "cancel", "snooze"}
	for i := range 12 {
		group := "a"
		if i%3 == 0 {
			group = "b"
		}
		args = append(args, ManyArgs{Group: group, Mode: modes[i%len(modes)], N: i})
	}
	ids := insertMany(t, c, args...)
	start(t, c)

	want := map[string]backend.State{"": backend.StateCompleted, "retry": backend.StateCompleted, "snooze": backend.StateCompleted,
		"discard": backend.StateDiscarded, "cancel": backend.StateCancelled}
	for i, id := range ids {
		a := args[i].(ManyArgs)
		j := waitState(t, be, id, want[a.Mode])
		wantAttempt := 1
		if a.Mode == "retry" {
			wantAttempt = 2
		}
		if int(j.Attempt) != wantAttempt {
			t.Errorf("job %d (%q): attempt %d, want %d", id, a.Mode, j.Attempt, wantAttempt)
		}
		if !jsonEqual(t, j.Output, []byte(fmt.Sprintf(`{"n":%d,"attempt":%d}`, a.N, wantAttempt))) {
			t.Errorf("job %d (%q): output %s", id, a.Mode, j.Output)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	grouped := 0
	for _, call := range calls {
		if len(call) > 4 {
			t.Errorf("a call of %d jobs, over MaxJobs 4: %+v", len(call), call)
		}
		for _, a := range call[1:] {
			if a.Group != call[0].Group {
				t.Errorf("a call mixes groups: %+v", call)
			}
		}
		if len(call) > 1 {
			grouped++
		}
	}
	if grouped == 0 {
		t.Errorf("no call took more than one job: %+v", calls)
	}
	for i, id := range ids {
		mode := args[i].(ManyArgs).Mode
		if wantRuns := map[bool]int{true: 2, false: 1}[mode == "retry" || mode == "snooze"]; seen[id] != wantRuns {
			t.Errorf("job %d (%q) ran %d times, want %d", id, mode, seen[id], wantRuns)
		}
	}
}

// testManyCompleteManyTx: a handler completes some jobs of its call in its
// own transaction; after the commit they stay completed whatever the
// handler returns, while the others take the handler's result. A
// transaction rolled back takes its completions with it.
func testManyCompleteManyTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	results := make(chan error, 4)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		var mine []*spool.Job[ManyArgs]
		for _, j := range jobs {
			if j.Args.Mode == "tx" {
				mine = append(mine, j)
			}
		}
		tx := h.BeginTx(t, be)
		err := spool.CompleteManyTx(ctx, btx(tx), mine)
		results <- err
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if jobs[0].Args.Group == "rollback" {
			_ = tx.Rollback(ctx)
			return errors.New("rolled back")
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return errors.New("fails the jobs not completed in the transaction")
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 3, MaxWait: 5 * time.Second, GroupBy: func(a ManyArgs) string { return a.Group }})
	c := newClient(t, be, fastConfig(ws, 10))
	// One attempt each: every group gets one call, and its results are
	// final.
	// A transaction is on one store: a sharded store keeps each group's
	// jobs on one by their flow key.
	var params []spool.InsertManyParams
	for _, a := range []ManyArgs{{Mode: "tx"}, {Mode: "tx"}, {}, {Group: "rollback", Mode: "tx"}, {Group: "rollback", Mode: "tx"}, {Group: "rollback"}} {
		params = append(params, spool.InsertManyParams{Args: a, InsertOpts: &spool.InsertOpts{MaxAttempts: 1, FlowKey: "group-" + a.Group}})
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	for range 2 {
		if err := recv(t, results, "CompleteManyTx"); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	for i, id := range ids[:2] {
		if j := waitState(t, be, id, backend.StateCompleted); j.Attempt != 1 || len(j.Errors) != 0 {
			t.Errorf("job %d completed in the committed transaction: %+v", i, j)
		}
	}
	wantErr := []string{"fails the jobs not completed in the transaction", "rolled back", "rolled back", "rolled back"}
	for i, id := range ids[2:] {
		if j := waitState(t, be, id, backend.StateDiscarded); len(j.Errors) != 1 || j.Errors[0].Error != wantErr[i] {
			t.Errorf("job %d, not completed in a committed transaction: errors %+v, want %q", i+2, j.Errors, wantErr[i])
		}
	}
	// Outside a job's context it is an error, not a panic.
	outside := h.BeginTx(t, be)
	defer func() { _ = outside.Rollback(context.Background()) }()
	if err := spool.CompleteManyTx(context.Background(), btx(outside), []*spool.Job[ManyArgs]{{JobRow: getJob(t, be, ids[0])}}); err == nil {
		t.Fatal("CompleteManyTx outside a job succeeded")
	}
}

// testManyCancelOne: cancelling one job of a running call ends that job's
// own context (ErrLeaseLost) and no other; the call's context ends only
// when all its jobs' have; the cancelled job stays cancelled and the others
// complete.
func testManyCancelOne(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	type call struct {
		ctx  context.Context
		jobs []*spool.Job[ManyArgs]
	}
	calls := make(chan call, 1)
	release := make(chan struct{})
	ended := make(chan error, 3)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		calls <- call{ctx, jobs}
		errs := spool.JobErrors{}
		for _, j := range jobs {
			if j.Args.Mode == "cancel" {
				jctx := spool.JobContext(ctx, j)
				<-jctx.Done()
				ended <- context.Cause(jctx)
				errs[j.ID] = context.Cause(jctx)
			}
		}
		<-release
		return errs
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 3, MaxWait: 5 * time.Second})
	c := newClient(t, be, fastConfig(ws, 3))
	ids := insertMany(t, c, ManyArgs{N: 1}, ManyArgs{Mode: "cancel"}, ManyArgs{N: 3})
	start(t, c)
	got := recv(t, calls, "the call")
	if len(got.jobs) != 3 {
		t.Fatalf("a call of %d jobs, want the 3 inserted together (MaxJobs 3)", len(got.jobs))
	}
	if _, err := c.JobCancel(context.Background(), ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, ended, "the cancelled job's context to end"); !errors.Is(err, spool.ErrLeaseLost) {
		t.Fatalf("cancelled job's context cause: %v, want ErrLeaseLost", err)
	}
	if err := got.ctx.Err(); err != nil {
		t.Fatalf("the call's context ended with one job cancelled: %v", err)
	}
	for _, j := range got.jobs {
		if j.Args.Mode != "cancel" && spool.JobContext(got.ctx, j).Err() != nil {
			t.Fatalf("job %d's context ended with another job cancelled", j.ID)
		}
	}
	close(release)
	waitState(t, be, ids[0], backend.StateCompleted)
	waitState(t, be, ids[2], backend.StateCompleted)
	if j := waitState(t, be, ids[1], backend.StateCancelled); j.Attempt != 1 {
		t.Fatalf("cancelled job: %+v", j)
	}
}

// testManyPanicAndTimeout: a panic in a call fails every job of the call
// with the panic and its stack; a call past its timeout fails every job
// with the timeout, and its context reports DeadlineExceeded.
func testManyPanicAndTimeout(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	timedOut := make(chan error, 1)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		if jobs[0].Attempt > 1 {
			return nil
		}
		switch jobs[0].Args.Group {
		case "panic":
			panic("many boom")
		case "timeout":
			<-ctx.Done()
			timedOut <- ctx.Err()
			return ctx.Err()
		}
		return nil
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 2, MaxWait: 5 * time.Second, Timeout: 300 * time.Millisecond,
		GroupBy: func(a ManyArgs) string { return a.Group }})
	c := newClient(t, be, fastConfig(ws, 4))
	ids := insertMany(t, c, ManyArgs{Group: "panic"}, ManyArgs{Group: "panic"}, ManyArgs{Group: "timeout"}, ManyArgs{Group: "timeout"})
	start(t, c)
	if err := recv(t, timedOut, "the call's timeout"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out call's ctx.Err: %v, want DeadlineExceeded", err)
	}
	for i, id := range ids {
		j := waitState(t, be, id, backend.StateCompleted)
		if j.Attempt != 2 || len(j.Errors) != 1 {
			t.Fatalf("job %d: attempt %d, errors %+v; want one failed attempt, then completed", i, j.Attempt, j.Errors)
		}
		e := j.Errors[0]
		switch i {
		case 0, 1:
			if !strings.Contains(e.Error, "many boom") || !strings.Contains(e.Trace, "goroutine") {
				t.Errorf("job %d after a panic: %+v", i, e)
			}
		default:
			if !strings.Contains(e.Error, "timed out") {
				t.Errorf("job %d after a timeout: %+v", i, e)
			}
		}
	}
}

// testManyGatheredLeaseExtended: a job waiting for its group to fill for
// longer than its lease is kept by heartbeats (the leader rescues every
// 50 ms), then runs once, in its first attempt.
func testManyGatheredLeaseExtended(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	waited := make(chan time.Duration, 1)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		runs.Add(int32(len(jobs)))
		at, _ := spool.JobStartedAt(spool.JobContext(ctx, jobs[0]))
		waited <- at.Sub(*jobs[0].AttemptedAt)
		return nil
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 10, MaxWait: 3 * time.Second})
	cfg := fastConfig(ws, 10)
	cfg.LeaseDuration = 2 * time.Second // shorter than MaxWait; as in HeartbeatKeepsLongJob
	c := newClient(t, be, cfg)
	id := insert(t, c, ManyArgs{}, nil)
	start(t, c)
	if w := recv(t, waited, "the call"); w < 2*time.Second {
		t.Fatalf("the call started %s after the claim, want about MaxWait (3s)", w)
	}
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("gathered job: attempt %d, runs %d; want 1 and 1 (its lease must be extended while it waits)", j.Attempt, runs.Load())
	}
}

// testManyStopReleasesGathered: a soft stop hands jobs waiting for their
// group back unstarted, their attempt given back; no call runs.
func testManyStopReleasesGathered(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		runs.Add(1)
		return nil
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 10, MaxWait: time.Minute})
	c := newClient(t, be, fastConfig(ws, 10))
	ids := insertMany(t, c, ManyArgs{}, ManyArgs{})
	start(t, c)
	for _, id := range ids {
		waitState(t, be, id, backend.StateRunning) // claimed, gathered
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if j := getJob(t, be, id); j.State != backend.StateAvailable || j.Attempt != 0 {
			t.Fatalf("gathered job after a soft stop: %s attempt %d, want available, attempt 0", j.State, j.Attempt)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d calls ran", n)
	}
}

// testManyFlowLimit: a queue's flow limit counts each job of a call: no
// call holds more jobs than the limit lets run, and no more run at once.
func testManyFlowLimit(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const limit = 3
	var (
		running, most atomic.Int32
		calls         atomic.Int32
	)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		calls.Add(1)
		n := running.Add(int32(len(jobs)))
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-int32(len(jobs)))
		return nil
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 10, MaxWait: 50 * time.Millisecond})
	cfg := fastConfig(ws, 10)
	cfg.Queues = map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10, Flow: &spool.Flow{GlobalLimit: limit}}}
	c := newClient(t, be, cfg)
	// One flow key: a sharded store keeps its jobs on one store, where
	// the limit holds for the whole queue.
	var params []spool.InsertManyParams
	for i := range 15 {
		params = append(params, spool.InsertManyParams{Args: ManyArgs{N: i}, InsertOpts: &spool.InsertOpts{FlowKey: "k"}})
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range res {
		ids = append(ids, r.ID)
	}
	start(t, c)
	for _, id := range ids {
		waitState(t, be, id, backend.StateCompleted)
	}
	if m := most.Load(); m > limit {
		t.Fatalf("%d jobs ran at once under a global limit of %d", m, limit)
	}
	if n := calls.Load(); n > 15 {
		t.Fatalf("%d calls for 15 jobs", n)
	}
}

// testManyHardStop: a hard stop cancels a running call's context and each
// of its jobs' (cause ErrClientStopping), and every job of the call is
// retried at once, its attempt counted.
func testManyHardStop(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan int, 1)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		started <- len(jobs)
		<-ctx.Done()
		for _, j := range jobs {
			if cause := context.Cause(spool.JobContext(ctx, j)); !errors.Is(cause, spool.ErrClientStopping) {
				return spool.Discard(fmt.Errorf("job %d: wrong cause %v", j.ID, cause))
			}
		}
		if !errors.Is(context.Cause(ctx), spool.ErrClientStopping) {
			return spool.Discard(fmt.Errorf("call: wrong cause %v", context.Cause(ctx)))
		}
		return ctx.Err()
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 3, MaxWait: 5 * time.Second})
	c := newClient(t, be, fastConfig(ws, 3))
	ids := insertMany(t, c, ManyArgs{N: 1}, ManyArgs{N: 2}, ManyArgs{N: 3})
	start(t, c)
	if n := recv(t, started, "the call"); n != 3 {
		t.Fatalf("a call of %d jobs, want 3", n)
	}
	if err := c.StopAndCancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		j := getJob(t, be, id)
		if j.State != backend.StateRetryable || j.Attempt != 1 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "interrupted by client stop") {
			t.Fatalf("job %d after a hard stop: %s attempt %d errors %+v", id, j.State, j.Attempt, j.Errors)
		}
	}
}

// testManyPauseReleasesGathered: pausing the queue hands the jobs waiting
// for their group back unstarted, as it does prefetched ones, and no call
// starts while it is paused.
func testManyPauseReleasesGathered(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	admin := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	calls := make(chan int, 4)
	ws := spool.NewWorkers()
	spool.AddManyWorker(ws, spool.WorkManyFunc(func(ctx context.Context, jobs []*spool.Job[ManyArgs]) error {
		calls <- len(jobs)
		return nil
	}), spool.ManyConfig[ManyArgs]{MaxJobs: 10, MaxWait: time.Minute})
	cfg := fastConfig(ws, 10)
	cfg.LeaseDuration = 10 * time.Second
	c := newClient(t, be, cfg)
	ids := insertMany(t, c, ManyArgs{N: 1}, ManyArgs{N: 2})
	start(t, c)
	for _, id := range ids {
		waitState(t, be, id, backend.StateRunning) // claimed, gathered
	}
	if err := admin.QueuePause(ctx, spool.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if j := waitState(t, be, id, backend.StateAvailable); j.Attempt != 0 {
			t.Fatalf("job %d handed back with attempt %d, want 0", id, j.Attempt)
		}
	}
	select {
	case n := <-calls:
		t.Fatalf("a call of %d jobs ran in a paused queue", n)
	default:
	}
}
