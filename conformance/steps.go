package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// Durable steps, waits and signals (docs/durable.md).
func stepTests() []namedTest {
	return []namedTest{
		{"StepRecordedNotRerunAfterRetry", testStepNotRerun},
		{"StepsWrittenBehindBeforeOutcomeAndWait", testStepsBehind},
		{"StepStaleFenceCannotRecord", testStepFencing},
		{"StepNotRerunAfterCrashRescue", testStepAfterRescue},
		{"StepTxRollbackLeavesNoStep", testStepTx},
		{"StepNamesChecked", testStepNames},
		{"SleepFreesWorkerAndWaitsItsTime", testSleep},
		{"WaitWrittenWhenHandlerReturns", testWaitAtReturn},
		{"RecordsGoWithJobDeletedAtCompletion", testRecordsGoWithJob},
		{"RecordsGoWithJobDeleted", testRecordsGoWithDeleted},
		{"SignalBeforeWaitKept", testSignalBeforeWait},
		{"SignalFirstWins", testSignalFirstWins},
		{"SignalWakesWaiterNoneLost", testSignalWakes},
		{"SignalTimeoutError", testSignalTimeout},
	}
}

// StepArgs is the job of the durable-step subjects.
type StepArgs struct {
	Mode string `json:"mode,omitempty"`
	N    int    `json:"n,omitempty"`
}

// Kind implements spool.JobArgs.
func (StepArgs) Kind() string { return "steps" }

// counter counts calls by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func durableOf(t *testing.T, be backend.Backend, id int64) *backend.JobDurable {
	t.Helper()
	d, err := be.JobDurable(context.Background(), id)
	if err != nil {
		t.Fatalf("read steps of job %d: %v", id, err)
	}
	return d
}

func stepNames(d *backend.JobDurable) []string {
	var out []string
	for _, s := range d.Steps {
		out = append(out, s.Name)
	}
	return out
}

// testStepNotRerun: a step recorded before a failure is not run again by
// the retry, which gets its recorded result back; the failed step runs
// again; every step is recorded once, with its result.
func testStepNotRerun(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var calls counter
	done := make(chan string, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		a, err := spool.Step(ctx, "charge", func(ctx context.Context) (string, error) {
			calls.add("charge")
			return fmt.Sprintf("charged-%d", j.Attempt), nil
		})
		if err != nil {
			return err
		}
		b, err := spool.Step(ctx, "ship", func(ctx context.Context) (int, error) {
			if calls.add("ship") == 1 {
				return 0, errors.New("carrier down")
			}
			return 42, nil
		})
		if err != nil {
			return err
		}
		done <- fmt.Sprintf("%s %d attempt %d", a, b, j.Attempt)
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	if got := recv(t, done, "the second attempt"); got != "charged-1 42 attempt 2" {
		t.Fatalf("second attempt saw %q, want the first attempt's charge replayed", got)
	}
	waitState(t, be, id, backend.StateCompleted)
	if n := calls.get("charge"); n != 1 {
		t.Fatalf("recorded step ran %d times, want 1", n)
	}
	d := durableOf(t, be, id)
	if got := stepNames(d); len(got) != 2 || got[0] != "charge" || got[1] != "ship" {
		t.Fatalf("steps %v, want [charge ship]", got)
	}
	if !jsonEqual(t, d.Steps[0].Result, json.RawMessage(`"charged-1"`)) || !jsonEqual(t, d.Steps[1].Result, json.RawMessage(`42`)) {
		t.Fatalf("results %s %s", d.Steps[0].Result, d.Steps[1].Result)
	}
	if d.Steps[1].Fence == d.Steps[0].Fence || d.Steps[0].At.IsZero() {
		t.Fatalf("steps recorded under fences %d and %d at %v: want two attempts' fences and a time", d.Steps[0].Fence, d.Steps[1].Fence, d.Steps[0].At)
	}
}

// testStepsBehind: a run's step records, written behind its steps, are
// written before its outcome and before its wait: a run of many steps that
// fails right after them, and one that sleeps right after them, leave
// every step recorded, so none runs twice.
func testStepsBehind(t *testing.T, h Harness) {
	const n = 30
	be := h.NewBackend(t)
	var calls counter
	done := make(chan int, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		for i := range n {
			name := fmt.Sprintf("s%d", i)
			if _, err := spool.Step(ctx, name, func(ctx context.Context) (int, error) { return calls.add(name), nil }); err != nil {
				return err
			}
		}
		switch j.Attempt {
		case 1:
			return errors.New("fails after its steps")
		}
		for i := range n {
			name := fmt.Sprintf("t%d", i)
			if _, err := spool.Step(ctx, name, func(ctx context.Context) (int, error) { return calls.add(name), nil }); err != nil {
				return err
			}
		}
		if err := spool.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
		done <- int(j.Attempt)
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	if got := recv(t, done, "the run after the sleep"); got != 2 {
		t.Fatalf("finished at attempt %d, want 2 (the sleep gives its attempt back)", got)
	}
	waitState(t, be, id, backend.StateCompleted)
	for _, p := range []string{"s", "t"} {
		for i := range n {
			if got := calls.get(fmt.Sprintf("%s%d", p, i)); got != 1 {
				t.Fatalf("step %s%d ran %d times, want 1", p, i, got)
			}
		}
	}
	if d := durableOf(t, be, id); len(d.Steps) != 2*n+1 {
		t.Fatalf("%d records, want %d steps and the sleep", len(d.Steps), 2*n)
	}
}

// claimOne claims the default queue's one job with a lease of d.
func claimOne(t *testing.T, be backend.Backend, d time.Duration) *backend.JobRow {
	t.Helper()
	rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: d, ClaimID: "steps"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rowIDs(rows), err)
	}
	return rows[0]
}

// rescueOne waits for the lease of the one running job to end and rescues it.
func rescueOne(t *testing.T, be backend.Backend) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(context.Background(), &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retried == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// testStepFencing: a step is recorded only under the lease that holds the
// job; a stale lease records nothing and cannot park the job; a name is
// recorded once.
func testStepFencing(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, nil)
	first := claimOne(t, be, time.Millisecond)
	rescueOne(t, be)
	second := claimOne(t, be, time.Minute)
	if second.ID != id || second.Fence == first.Fence {
		t.Fatalf("second claim %+v", second)
	}
	rec := func(l backend.LeaseRef, name, result string) (bool, error) {
		return be.StepRecord(ctx, &backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(result)})
	}
	if ok, err := rec(first.Lease(), "charge", `"stale"`); ok || err != nil {
		t.Fatalf("stale lease recorded a step: %v %v", ok, err)
	}
	if ok, err := rec(second.Lease(), "charge", `"live"`); !ok || err != nil {
		t.Fatalf("live lease: %v %v", ok, err)
	}
	if ok, err := rec(second.Lease(), "charge", `"again"`); ok || !errors.Is(err, backend.ErrStepRecorded) {
		t.Fatalf("second record of one name: %v %v, want ErrStepRecorded", ok, err)
	}
	// A batch applies each record as it would apply alone.
	many, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: first.Lease(), Name: "ship", Result: json.RawMessage(`"stale"`)},
		{Lease: second.Lease(), Name: "charge", Result: json.RawMessage(`"again"`)},
		{Lease: second.Lease(), Name: "email", Result: json.RawMessage(`"sent"`)},
		{Lease: second.Lease(), Name: "email", Result: json.RawMessage(`"twice"`)},
	}})
	if err != nil || len(many) != 4 || many[0].Recorded || many[0].Err != nil || many[1].Recorded ||
		!errors.Is(many[1].Err, backend.ErrStepRecorded) || !many[2].Recorded || many[2].Err != nil ||
		many[3].Recorded || !errors.Is(many[3].Err, backend.ErrStepRecorded) {
		t.Fatalf("batch of a stale, a repeated, a new record and the new one again: %+v %v", many, err)
	}
	w, err := be.JobWait(ctx, &backend.JobWaitParams{Lease: first.Lease(), Delay: time.Hour})
	if err != nil || w.Applied {
		t.Fatalf("stale lease parked the job: %+v %v", w, err)
	}
	d := durableOf(t, be, id)
	if got := stepNames(d); len(got) != 2 || got[0] != "charge" || got[1] != "email" ||
		!jsonEqual(t, d.Steps[0].Result, json.RawMessage(`"live"`)) || d.Steps[0].Fence != second.Fence {
		t.Fatalf("steps %+v, want the live lease's two", d.Steps)
	}
	if j := getJob(t, be, id); j.State != backend.StateRunning || j.Fence != second.Fence {
		t.Fatalf("job changed by a stale lease: %+v", j)
	}
	// The live lease parks the job: scheduled, the attempt given back,
	// and no longer running, so its own records are refused.
	w, err = be.JobWait(ctx, &backend.JobWaitParams{Lease: second.Lease(), Delay: time.Hour})
	if err != nil || !w.Applied || w.Signalled || w.Queue != spool.DefaultQueue {
		t.Fatalf("park: %+v %v", w, err)
	}
	j := getJob(t, be, id)
	if j.State != backend.StateScheduled || j.Attempt != second.Attempt-1 || time.Until(j.RunAt) < 50*time.Minute {
		t.Fatalf("parked job %+v, want scheduled an hour ahead with its attempt given back", j)
	}
	if ok, err := rec(second.Lease(), "after", `1`); ok || err != nil {
		t.Fatalf("record after the park: %v %v", ok, err)
	}
	if rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"}); err != nil || len(rows) != 0 {
		t.Fatalf("parked job claimed before its time: %v %v", rowIDs(rows), err)
	}
}

// testStepAfterRescue: a worker that recorded a step and died (its lease
// ran out, rescue returned the job) never has the step run again.
func testStepAfterRescue(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ins := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	id := insert(t, ins, StepArgs{}, nil)
	dead := claimOne(t, be, time.Millisecond)
	if ok, err := be.StepRecord(ctx, &backend.StepRecordParams{Lease: dead.Lease(), Name: "charge", Result: json.RawMessage(`{"ref":"ch_1"}`)}); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	rescueOne(t, be)
	var calls counter
	got := make(chan string, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		r, err := spool.Step(ctx, "charge", func(ctx context.Context) (map[string]string, error) {
			calls.add("charge")
			return map[string]string{"ref": "ch_2"}, nil
		})
		if err != nil {
			return err
		}
		got <- r["ref"]
		return nil
	}))
	c := newClient(t, h.Reopen(t, be), fastConfig(ws, 1))
	start(t, c)
	if ref := recv(t, got, "the rescued job's run"); ref != "ch_1" {
		t.Fatalf("rescued job's step returned %q, want the recorded ch_1", ref)
	}
	waitState(t, be, id, backend.StateCompleted)
	if n := calls.get("charge"); n != 0 {
		t.Fatalf("recorded step ran %d times after the rescue", n)
	}
}

// testStepTx: a step recorded in the caller's transaction goes with a
// rollback (the next attempt runs it again) and stays with a commit; a
// name used twice in one run is refused.
func testStepTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var calls counter
	errs := make(chan error, 4)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		tx := h.BeginTx(t, be)
		v, err := spool.StepTx(ctx, btx(tx), "debit", func(ctx context.Context) (int, error) {
			return calls.add("debit"), nil
		})
		if err != nil {
			_ = tx.Rollback(ctx)
			errs <- err
			return err
		}
		if j.Attempt == 1 {
			_ = tx.Rollback(ctx)
			tx2 := h.BeginTx(t, be)
			_, again := spool.StepTx(ctx, btx(tx2), "debit", func(ctx context.Context) (int, error) { return 0, nil })
			_ = tx2.Rollback(ctx)
			errs <- again
			return errors.New("rolled back")
		}
		if err := tx.Commit(ctx); err != nil {
			errs <- err
			return err
		}
		errs <- nil
		if v != 2 {
			return fmt.Errorf("debit returned %d", v)
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	if err := recv(t, errs, "the first attempt"); !errors.Is(err, spool.ErrStepReused) {
		t.Fatalf("name used twice in one run: %v, want ErrStepReused", err)
	}
	if err := recv(t, errs, "the second attempt"); err != nil {
		t.Fatal(err)
	}
	waitState(t, be, id, backend.StateCompleted)
	d := durableOf(t, be, id)
	if len(d.Steps) != 1 || !jsonEqual(t, d.Steps[0].Result, json.RawMessage(`2`)) {
		t.Fatalf("steps %+v, want the committed debit 2 alone", d.Steps)
	}
	if n := calls.get("debit"); n != 2 {
		t.Fatalf("debit ran %d times, want 2 (once rolled back)", n)
	}
}

// testStepNames: bad names are refused before anything runs; Step outside
// a job is an error; a recorded result that does not decode is an error.
func testStepNames(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	if _, err := spool.Step(ctx, "x", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, spool.ErrNotInJob) {
		t.Fatalf("step outside a job: %v", err)
	}
	results := make(chan []error, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		var out []error
		ran := false
		fn := func(context.Context) (int, error) { ran = true; return 1, nil }
		for _, name := range []string{"", "spool:sleep:1", string(make([]byte, spool.StepNameMaxLen+1)), "bad\xff"} {
			_, err := spool.Step(ctx, name, fn)
			out = append(out, err)
		}
		if _, err := spool.Step(ctx, "num", fn); err != nil {
			out = append(out, err)
		}
		if ran != true {
			out = append(out, errors.New("valid step did not run"))
		}
		results <- out
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	insert(t, c, StepArgs{}, nil)
	errs := recv(t, results, "the run")
	if len(errs) != 4 {
		t.Fatalf("errors %v", errs)
	}
	for i, err := range errs {
		if !errors.Is(err, spool.ErrStepName) {
			t.Fatalf("name %d: %v, want ErrStepName", i, err)
		}
	}
	if _, err := c.Signal(ctx, 1<<40, "go", nil); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("signal to an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := c.Signal(ctx, 1, "", nil); !errors.Is(err, spool.ErrStepName) {
		t.Fatalf("signal with no name: %v", err)
	}
	if _, err := spool.AwaitSignal(ctx, "go", time.Second); !errors.Is(err, spool.ErrNotInJob) {
		t.Fatalf("await outside a job: %v", err)
	}
}

// testSleep: a sleeping job holds no worker slot (another job runs on the
// only slot meanwhile), is not claimed before its time, uses no attempt,
// and replays its steps when it wakes.
func testSleep(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const nap = 1500 * time.Millisecond
	var calls counter
	parked := make(chan time.Time, 1)
	woke := make(chan time.Duration, 1)
	otherRan := make(chan struct{}, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		if j.Args.Mode == "other" {
			otherRan <- struct{}{}
			return nil
		}
		start, err := spool.Step(ctx, "before", func(context.Context) (time.Time, error) {
			calls.add("before")
			return time.Now(), nil
		})
		if err != nil {
			return err
		}
		if err := spool.Sleep(ctx, nap); err != nil {
			if errors.Is(err, spool.ErrWaiting) {
				parked <- time.Now()
			}
			return err
		}
		woke <- time.Since(start)
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	recv(t, parked, "the sleep")
	j := waitState(t, be, id, backend.StateScheduled)
	if j.Attempt != 0 {
		t.Fatalf("sleeping job's attempt %d, want 0 (given back)", j.Attempt)
	}
	insert(t, c, StepArgs{Mode: "other"}, nil)
	select {
	case <-otherRan:
	case d := <-woke:
		t.Fatalf("the sleeper woke after %s before the other job ran on the only slot", d)
	}
	slept := recv(t, woke, "the wake-up")
	if slept < nap-100*time.Millisecond {
		t.Fatalf("woke %s after the first step, before the sleep of %s ended", slept, nap)
	}
	j = waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 1 || calls.get("before") != 1 {
		t.Fatalf("attempt %d, step ran %d times; want 1 and 1", j.Attempt, calls.get("before"))
	}
	if got := stepNames(durableOf(t, be, id)); len(got) != 2 || got[1] != "spool:sleep:1" {
		t.Fatalf("steps %v", got)
	}
}

// testWaitAtReturn: a wait is written when the handler returns, not when
// Sleep does, so the job, due again at once, does not start a second
// attempt beside the handler still returning; a step or wait called after
// the wait fails with ErrWaiting without running.
func testWaitAtReturn(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var calls counter
	asked := make(chan []error, 1)
	gate := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		calls.add(fmt.Sprintf("run %d", j.Attempt))
		err := spool.Sleep(ctx, time.Millisecond)
		if err == nil {
			return nil
		}
		_, after := spool.Step(ctx, "after", func(context.Context) (int, error) {
			calls.add("after")
			return 1, nil
		})
		again := spool.Sleep(ctx, time.Hour)
		asked <- []error{err, after, again}
		<-gate
		return err
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	errs := recv(t, asked, "the sleep")
	for i, err := range errs {
		if !errors.Is(err, spool.ErrWaiting) {
			close(gate)
			t.Fatalf("call %d after the sleep: %v, want ErrWaiting", i, err)
		}
	}
	// The handler has not returned: its lease still holds the job.
	j := getJob(t, be, id)
	close(gate)
	if j.State != backend.StateRunning || j.Attempt != 1 {
		t.Fatalf("job %s at attempt %d while its handler had not returned from a sleep; want running at attempt 1", j.State, j.Attempt)
	}
	j = waitState(t, be, id, backend.StateCompleted)
	if calls.get("run 1") != 2 || calls.get("after") != 0 || j.Attempt != 1 {
		t.Fatalf("runs at attempt 1: %d (want 2: the sleep gives the attempt back), step after the wait ran %d times, final attempt %d",
			calls.get("run 1"), calls.get("after"), j.Attempt)
	}
	if got := stepNames(durableOf(t, be, id)); len(got) != 1 || got[0] != "spool:sleep:1" {
		t.Fatalf("steps %v, want only the first sleep's record", got)
	}
}

// testRecordsGoWithJob: a job deleted at its completion (CompletedRetention
// < 0) takes its steps and signals with it, in the call that writes the
// completion (docs/durable.md): once the client reports the completion,
// which it does after that call, the job and its records are gone.
func testRecordsGoWithJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		if _, err := spool.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := spool.AwaitSignal(ctx, "go", time.Hour)
		return err
	}))
	cfg := fastConfig(ws, 1)
	cfg.CompletedRetention = -1
	c := newClient(t, be, cfg)
	events, end := c.Subscribe()
	defer end()
	id := insert(t, c, StepArgs{}, nil)
	if _, err := c.Signal(ctx, id, "go", 1); err != nil {
		t.Fatal(err)
	}
	if d := durableOf(t, be, id); len(d.Signals) != 1 {
		t.Fatalf("signals before the run: %+v", d.Signals)
	}
	start(t, c)
	if e := recv(t, events, "the job's outcome"); e.JobID != id || e.Kind != spool.EventJobCompleted {
		t.Fatalf("event %s of job %d (error %q), want job %d completed", e.Kind, e.JobID, e.Error, id)
	}
	_, err := be.JobGet(ctx, id)
	d := durableOf(t, be, id)
	if !errors.Is(err, backend.ErrNotFound) || len(d.Steps) != 0 || len(d.Signals) != 0 {
		t.Fatalf("job %d reported completed, deleted at its completion (get: %v), left %d steps and %d signals", id, err, len(d.Steps), len(d.Signals))
	}
}

// testRecordsGoWithDeleted: the signals of a pending job go with it when
// it is deleted, alone or in bulk, and those of a job that never waited
// and was deleted at its completion are gone after the next cleanup at
// the latest.
func testRecordsGoWithDeleted(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error { return nil }))
	cfg := fastConfig(ws, 1)
	cfg.CompletedRetention = -1
	c := newClient(t, be, cfg)
	signalled := func(opts *spool.InsertOpts) int64 {
		t.Helper()
		id := insert(t, c, StepArgs{}, opts)
		if _, err := c.Signal(ctx, id, "go", 1); err != nil {
			t.Fatalf("signal job %d: %v", id, err)
		}
		if d := durableOf(t, be, id); len(d.Signals) != 1 {
			t.Fatalf("job %d: signals %+v, want one", id, d.Signals)
		}
		return id
	}
	alone, bulk := signalled(&spool.InsertOpts{Queue: "held"}), signalled(&spool.InsertOpts{Queue: "bulk"})
	if _, err := c.JobDelete(ctx, alone); err != nil {
		t.Fatalf("delete job %d: %v", alone, err)
	}
	if res, err := c.JobsDelete(ctx, spool.JobFilter{Queue: "bulk"}); err != nil || res.Changed != 1 {
		t.Fatalf("bulk delete: %+v %v, want one job deleted", res, err)
	}
	for _, id := range []int64{alone, bulk} {
		if d := durableOf(t, be, id); len(d.Signals) != 0 {
			t.Fatalf("job %d deleted pending left its signals %+v", id, d.Signals)
		}
	}
	ran := signalled(nil)
	start(t, c)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := be.JobGet(ctx, ran); errors.Is(err, backend.ErrNotFound) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d was not deleted at its completion", ran)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := be.JobCleanup(ctx, &backend.JobCleanupParams{}); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if d := durableOf(t, be, ran); len(d.Signals) != 0 {
		t.Fatalf("job %d deleted at its completion, after a cleanup, left its signals %+v", ran, d.Signals)
	}
}

// testSignalBeforeWait: a signal sent before the job awaits it is kept:
// AwaitSignal returns its payload without parking.
func testSignalBeforeWait(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	got := make(chan string, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		p, err := spool.AwaitSignal(ctx, "approved", time.Hour)
		if err != nil {
			got <- "error: " + err.Error()
			return err
		}
		got <- string(p)
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	id := insert(t, c, StepArgs{}, nil)
	sender := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	res, err := sender.Signal(ctx, id, "approved", map[string]string{"by": "ann"})
	if err != nil || !res.First || res.Woke {
		t.Fatalf("signal: %+v %v", res, err)
	}
	start(t, c)
	if p := recv(t, got, "the run"); !jsonEqual(t, json.RawMessage(p), json.RawMessage(`{"by":"ann"}`)) {
		t.Fatalf("await returned %s", p)
	}
	if j := waitState(t, be, id, backend.StateCompleted); j.Attempt != 1 {
		t.Fatalf("attempt %d, want 1: no park", j.Attempt)
	}
}

// testSignalFirstWins: of signals of one name sent at once from several
// processes, exactly one is first and its payload is kept.
func testSignalFirstWins(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	id := insert(t, c, StepArgs{}, &spool.InsertOpts{RunAt: time.Now().Add(time.Hour)})
	const n = 8
	senders := []*spool.Client{c, newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})}
	var wg sync.WaitGroup
	var firsts atomic.Int32
	winner := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := senders[i%2].Signal(ctx, id, "go", i)
			if err != nil {
				errs <- err
				return
			}
			if res.First {
				firsts.Add(1)
				winner <- i
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if firsts.Load() != 1 {
		t.Fatalf("%d signals were first, want 1", firsts.Load())
	}
	w := <-winner
	d := durableOf(t, be, id)
	if len(d.Signals) != 1 || !jsonEqual(t, d.Signals[0].Payload, json.RawMessage(fmt.Sprint(w))) || d.Signals[0].Name != "go" {
		t.Fatalf("signals %+v, want the first one (%d) alone", d.Signals, w)
	}
	if j := getJob(t, be, id); j.State != backend.StateScheduled {
		t.Fatalf("a signal nobody awaits changed the job: %s", j.State)
	}
}

// testSignalWakes: jobs parked awaiting a signal resume when it comes,
// whether it comes before, during or after the park, long before the
// timeout; their steps are not run again; none is lost.
func testSignalWakes(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	const jobs = 12
	var calls counter
	about := make(chan int64, jobs)
	got := make(chan string, jobs)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		ran := false
		if _, err := spool.Step(ctx, "prepare", func(context.Context) (int, error) {
			calls.add(fmt.Sprint(j.ID))
			ran = true
			return j.Args.N, nil
		}); err != nil {
			return err
		}
		if ran {
			about <- j.ID
		}
		p, err := spool.AwaitSignal(ctx, "go", time.Hour)
		if err != nil {
			return err
		}
		got <- fmt.Sprintf("%d %s", j.ID, p)
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 4))
	start(t, c)
	sender := newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger(t)})
	var ids []int64
	for i := range jobs {
		ids = append(ids, insert(t, c, StepArgs{N: i}, nil))
	}
	seen := map[int64]bool{}
	for range jobs {
		id := recv(t, about, "a job about to wait")
		if seen[id] {
			t.Fatalf("job %d ran its step twice", id)
		}
		seen[id] = true
		// Half are signalled at once, racing the park; half once parked.
		if id%2 == 0 {
			waitState(t, be, id, backend.StateScheduled)
		}
		if _, err := sender.Signal(ctx, id, "go", id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range jobs {
		select {
		case <-got:
		case <-time.After(15 * time.Second):
			for _, id := range ids {
				t.Logf("job %d: %+v %+v", id, getJob(t, be, id), durableOf(t, be, id))
			}
			t.Fatalf("%d of %d signalled jobs resumed", i, jobs)
		}
	}
	for _, id := range ids {
		j := waitState(t, be, id, backend.StateCompleted)
		if calls.get(fmt.Sprint(id)) != 1 || j.Attempt != 1 {
			t.Fatalf("job %d: step ran %d times, attempt %d", id, calls.get(fmt.Sprint(id)), j.Attempt)
		}
		if d := durableOf(t, be, id); d.WaitSignal != "" && d.WaitSignal != "go" {
			t.Fatalf("job %d waits for %q", id, d.WaitSignal)
		}
	}
}

// testSignalTimeout: a wait with no signal ends in a *SignalTimeoutError at
// its timeout; a wait needs a timeout.
func testSignalTimeout(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	got := make(chan error, 2)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[StepArgs]) error {
		if _, err := spool.AwaitSignal(ctx, "never", 0); !errors.Is(err, spool.ErrUntimedWait) {
			got <- fmt.Errorf("untimed wait: %v", err)
			return nil
		}
		_, err := spool.AwaitSignal(ctx, "never", 300*time.Millisecond)
		if errors.Is(err, spool.ErrWaiting) {
			return err
		}
		got <- err
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, StepArgs{}, nil)
	err := recv(t, got, "the timeout")
	var te *spool.SignalTimeoutError
	if !errors.As(err, &te) || !errors.Is(err, spool.ErrSignalTimeout) || te.Signal != "never" || te.JobID != id {
		t.Fatalf("after the timeout: %v, want a *SignalTimeoutError", err)
	}
	if j := waitState(t, be, id, backend.StateCompleted); j.Attempt != 1 {
		t.Fatalf("attempt %d", j.Attempt)
	}
}
