package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// workflowTests are the subjects of workflows and batches (docs/workflows.md).
func workflowTests() []namedTest {
	return []namedTest{
		{"WorkflowWaitingNeverClaimed", testWorkflowWaitingNeverClaimed},
		{"WorkflowDiamondOutputs", testWorkflowDiamond},
		{"WorkflowRefusedWritesNothing", testWorkflowRefused},
		{"WorkflowFailurePolicy", testWorkflowFailurePolicy},
		{"WorkflowCancelAndRetention", testWorkflowCancelRetention},
		{"WorkflowRetry", testWorkflowRetry},
		{"WorkflowTx", testWorkflowTx},
		{"WorkflowFlowRules", testWorkflowFlowRules},
		{"WorkflowDeleteKeepsWaitedOn", testWorkflowDeleteKeepsWaitedOn},
		{"BatchCallbacks", testBatchCallbacks},
		{"BatchOpenAndSeal", testBatchOpen},
		{"BatchCallbackExactlyOnce", testBatchExactlyOnce},
	}
}

// noteTask is a workflow task that runs NoteArgs{N: n, Mode: mode}.
func noteTask(w *spool.Workflow, name string, n int, mode string, deps ...spool.Dep) {
	w.Add(name, NoteArgs{N: n, Mode: mode}, nil, deps...)
}

// claimAll claims every due job of queue (up to 1,000) directly.
func claimAll(t *testing.T, be backend.Backend, queue string) []*backend.JobRow {
	t.Helper()
	rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: queue, Max: 1000, Lease: time.Minute, ClaimID: "conformance#1"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return rows
}

func finishRow(t *testing.T, be backend.Backend, r *backend.JobRow, o backend.Outcome) {
	t.Helper()
	res, err := be.JobFinishMany(context.Background(), &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: r.Lease(), Outcome: o}}})
	if err != nil || len(res.Rejected) > 0 {
		t.Fatalf("finish job %d: %v, rejected %v", r.ID, err, res)
	}
}

func states(t *testing.T, be backend.Backend, ids map[string]int64) map[string]backend.State {
	t.Helper()
	out := map[string]backend.State{}
	for name, id := range ids {
		out[name] = getJob(t, be, id).State
	}
	return out
}

// dumpOnFailure logs the tasks' rows when t fails.
func dumpOnFailure(t *testing.T, be backend.Backend, ids map[string]int64) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for name, id := range ids {
			if j, err := be.JobGet(context.Background(), id); err == nil {
				t.Logf("task %q: job %d %s deps_left %d wait %q has_dependents %v run_at %s errors %v", name, id, j.State, j.DepsLeft, j.WaitKind, j.HasDependents, j.RunAt, j.Errors)
			}
		}
	})
}

func wantStates(t *testing.T, be backend.Backend, ids map[string]int64, want map[string]backend.State) {
	t.Helper()
	got := states(t, be, ids)
	for name, s := range want {
		if got[name] != s {
			t.Fatalf("task %q: state %s, want %s (all: %v)", name, got[name], s, got)
		}
	}
}

// testWorkflowWaitingNeverClaimed: tasks with dependencies are inserted
// waiting, no claim returns them (nor a flow claim, nor any queue's), and
// the finish that completes the last dependency leaves them available when
// it returns: no resolver runs in between.
func testWorkflowWaitingNeverClaimed(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	w := spool.NewWorkflow("chain")
	noteTask(w, "a", 1, "")
	noteTask(w, "b", 2, "", spool.After("a"))
	noteTask(w, "c", 3, "", spool.After("a"), spool.After("b"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateAvailable, "b": backend.StateWaiting, "c": backend.StateWaiting})
	if j := getJob(t, be, res.Tasks["c"]); j.DepsLeft != 2 || j.WaitKind != backend.WaitDeps || j.WorkflowTask != "c" || j.WorkflowID != res.ID {
		t.Fatalf("waiting task: deps_left %d wait_kind %q task %q workflow %d", j.DepsLeft, j.WaitKind, j.WorkflowTask, j.WorkflowID)
	}
	if n := countStates(t, be)[backend.StateWaiting]; n != 2 {
		t.Fatalf("queue stats count %d waiting, want 2", n)
	}
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 || rows[0].ID != res.Tasks["a"] {
		t.Fatalf("claim took %d jobs, want only task a", len(rows))
	}
	if again := claimAll(t, be, spool.DefaultQueue); len(again) != 0 {
		t.Fatalf("a second claim took %d jobs; waiting jobs must never be claimed", len(again))
	}
	finishRow(t, be, rows[0], backend.OutcomeComplete)
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateCompleted, "b": backend.StateAvailable, "c": backend.StateWaiting})
	if j := getJob(t, be, res.Tasks["c"]); j.DepsLeft != 1 {
		t.Fatalf("task c: deps_left %d after a completed, want 1", j.DepsLeft)
	}
	rows = claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 || rows[0].ID != res.Tasks["b"] {
		t.Fatalf("claim took %d jobs, want task b", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeComplete)
	wantStates(t, be, res.Tasks, map[string]backend.State{"c": backend.StateAvailable})
	if j := getJob(t, be, res.Tasks["c"]); j.DepsLeft != 0 || j.WaitKind != "" {
		t.Fatalf("released task: deps_left %d wait_kind %q", j.DepsLeft, j.WaitKind)
	}
}

// testWorkflowDeleteKeepsWaitedOn: neither a bulk delete nor a single one
// takes a waiting task or a job others wait on (deleted, it would leave its
// dependents waiting forever); once the parent's finish settled them, both
// go.
func testWorkflowDeleteKeepsWaitedOn(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	w := spool.NewWorkflow("pair")
	noteTask(w, "a", 1, "")
	noteTask(w, "b", 2, "", spool.After("a"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	dumpOnFailure(t, be, res.Tasks)
	if r, err := c.JobsDelete(ctx, spool.JobFilter{Queue: spool.DefaultQueue}); err != nil || r.Changed != 0 {
		t.Fatalf("bulk delete: %+v, %v; want nothing deleted (a is waited on, b waits)", r, err)
	}
	if _, err := c.JobDelete(ctx, res.Tasks["a"]); !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("delete of a job others wait on: %v, want ErrInvalidState", err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateAvailable, "b": backend.StateWaiting})
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 || rows[0].ID != res.Tasks["a"] {
		t.Fatalf("claim took %d jobs, want only task a", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeComplete)
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateCompleted, "b": backend.StateAvailable})
	if r, err := c.JobsDelete(ctx, spool.JobFilter{Queue: spool.DefaultQueue}); err != nil || r.Changed != 2 {
		t.Fatalf("bulk delete after a settled b: %+v, %v; want both deleted", r, err)
	}
}

// testWorkflowDiamond: a diamond runs in dependency order under a client;
// the join task starts only after both branches completed and reads their
// outputs by task name.
func testWorkflowDiamond(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	type joined struct {
		sum  int
		deps []backend.State
		err  error
	}
	got := make(chan joined, 1)
	var mu sync.Mutex
	var order []int
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		mu.Lock()
		order = append(order, j.Args.N)
		mu.Unlock()
		if j.Args.Mode != "join" {
			return spool.RecordOutput(ctx, map[string]int{"v": j.Args.N * 10})
		}
		var r joined
		for _, name := range []string{"left", "right"} {
			v, err := spool.DependencyOutput[map[string]int](ctx, name)
			if err != nil {
				r.err = err
				break
			}
			r.sum += v["v"]
		}
		if _, err := spool.DependencyOutput[int](ctx, "nope"); !errors.Is(err, spool.ErrNoDependency) && r.err == nil {
			r.err = fmt.Errorf("unknown dependency: %v, want ErrNoDependency", err)
		}
		deps, err := spool.DependencyOutputs(ctx)
		if err != nil {
			r.err = err
		}
		for _, d := range deps {
			r.deps = append(r.deps, d.State)
		}
		got <- r
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 4))
	start(t, c)
	w := spool.NewWorkflow("diamond")
	noteTask(w, "join", 4, "join", spool.After("left"), spool.After("right"))
	noteTask(w, "left", 2, "", spool.After("root"))
	noteTask(w, "right", 3, "", spool.After("root"))
	noteTask(w, "root", 1, "")
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	dumpOnFailure(t, be, res.Tasks)
	r := recv(t, got, "the join task")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum != 50 || len(r.deps) != 2 || r.deps[0] != backend.StateCompleted || r.deps[1] != backend.StateCompleted {
		t.Fatalf("join read sum %d, dependency states %v; want 50 from two completed", r.sum, r.deps)
	}
	waitState(t, be, res.Tasks["join"], backend.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 4 || order[0] != 1 || order[3] != 4 {
		t.Fatalf("run order %v: root first, join last", order)
	}
	d, err := c.Workflow(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "diamond" || d.Tasks != 4 || len(d.Jobs) != 4 || len(d.Edges) != 4 || d.Counts[backend.StateCompleted] != 4 || !d.Final() {
		t.Fatalf("workflow detail: %+v", d.WorkflowSummary)
	}
	list, err := c.Workflows(ctx, 0, 10)
	if err != nil || len(list) != 1 || list[0].ID != res.ID {
		t.Fatalf("workflow list: %v %v", list, err)
	}
}

// testWorkflowRefused: cycles, unknown dependencies, over-limit sizes and
// invalid tasks are refused with typed errors before anything is written.
func testWorkflowRefused(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	cycle := spool.NewWorkflow("cycle")
	noteTask(cycle, "a", 1, "", spool.After("c"))
	noteTask(cycle, "b", 2, "", spool.After("a"))
	noteTask(cycle, "c", 3, "", spool.After("b"))
	noteTask(cycle, "d", 4, "")
	self := spool.NewWorkflow("self")
	noteTask(self, "a", 1, "", spool.After("a"))
	unknown := spool.NewWorkflow("unknown")
	noteTask(unknown, "a", 1, "", spool.After("ghost"))
	dupName := spool.NewWorkflow("dup")
	noteTask(dupName, "a", 1, "")
	noteTask(dupName, "a", 2, "")
	uniqueDep := spool.NewWorkflow("unique")
	noteTask(uniqueDep, "a", 1, "")
	uniqueDep.Add("b", NoteArgs{N: 2}, &spool.InsertOpts{Unique: &spool.UniqueOpts{}}, spool.After("a"))
	badJob := spool.NewWorkflow("bad job")
	badJob.Add("a", NoteArgs{}, &spool.InsertOpts{Priority: 500})
	big := spool.NewWorkflow("big")
	for i := range spool.MaxWorkflowTasks + 1 {
		big.Add(fmt.Sprint(i), NoteArgs{N: i}, nil)
	}
	for _, tc := range []struct {
		w    *spool.Workflow
		want error
	}{
		{cycle, spool.ErrWorkflowCycle}, {self, spool.ErrWorkflowCycle}, {unknown, spool.ErrWorkflowUnknownDep},
		{dupName, spool.ErrWorkflowInvalid}, {uniqueDep, spool.ErrWorkflowInvalid}, {badJob, spool.ErrInvalidJob},
		{spool.NewWorkflow("empty"), spool.ErrWorkflowInvalid}, {big, spool.ErrWorkflowTooLarge},
	} {
		_, err := c.InsertWorkflow(ctx, tc.w)
		var we *spool.WorkflowError
		if !errors.Is(err, tc.want) || !errors.As(err, &we) {
			t.Errorf("workflow %q: %v, want a *WorkflowError matching %v", tc.w.Name(), err, tc.want)
		}
	}
	if rows, err := be.JobList(ctx, &backend.JobListParams{}); err != nil || len(rows) != 0 {
		t.Fatalf("after refused workflows: %d jobs (%v), want none", len(rows), err)
	}
	if list, err := c.Workflows(ctx, 0, 10); err != nil || len(list) != 0 {
		t.Fatalf("after refused workflows: %d workflows (%v), want none", len(list), err)
	}
	// A root task whose unique key is held refuses the whole workflow.
	if _, err := c.Insert(ctx, NoteArgs{N: 9}, &spool.InsertOpts{Unique: &spool.UniqueOpts{}}); err != nil {
		t.Fatal(err)
	}
	held := spool.NewWorkflow("held")
	held.Add("a", NoteArgs{N: 9}, &spool.InsertOpts{Unique: &spool.UniqueOpts{}})
	noteTask(held, "b", 1, "", spool.After("a"))
	if _, err := c.InsertWorkflow(ctx, held); !errors.Is(err, spool.ErrUniqueConflict) {
		t.Fatalf("workflow with a held unique key: %v, want ErrUniqueConflict", err)
	}
	if rows, _ := be.JobList(ctx, &backend.JobListParams{}); len(rows) != 1 {
		t.Fatalf("after the refused workflow: %d jobs, want the one unique job", len(rows))
	}
}

// testWorkflowFailurePolicy: a discarded task cancels the tasks that
// depend on it by default, and through them their dependents; a dependent
// by AfterAny runs as if it had completed.
func testWorkflowFailurePolicy(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	w := spool.NewWorkflow("fail")
	noteTask(w, "a", 1, "")
	noteTask(w, "b", 2, "", spool.After("a"))
	noteTask(w, "b2", 3, "", spool.After("b"))
	noteTask(w, "b3", 4, "", spool.AfterAny("b2"))
	noteTask(w, "c", 5, "", spool.AfterAny("a"))
	noteTask(w, "d", 6, "", spool.AfterAny("a"), spool.After("c"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 {
		t.Fatalf("claimed %d, want task a", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeDiscard)
	// b3 waits on b2 by AfterAny: b2's cancellation counts as done.
	wantStates(t, be, res.Tasks, map[string]backend.State{
		"a": backend.StateDiscarded, "b": backend.StateCancelled, "b2": backend.StateCancelled,
		"b3": backend.StateAvailable, "c": backend.StateAvailable, "d": backend.StateWaiting,
	})
	if j := getJob(t, be, res.Tasks["b"]); j.FinalizedAt == nil || len(j.Errors) == 0 {
		t.Fatalf("cancelled dependent: finalized_at %v errors %v; want both (the cause)", j.FinalizedAt, j.Errors)
	}
	rows = claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 2 {
		t.Fatalf("claimed %d, want b3 and c", len(rows))
	}
	for _, r := range rows {
		o := backend.OutcomeComplete
		if r.ID == res.Tasks["c"] {
			o = backend.OutcomeCancel
		}
		finishRow(t, be, r, o)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"d": backend.StateCancelled, "b3": backend.StateCompleted})
	// A retry of a waiting task is refused: it would run before its
	// dependencies.
	w2 := spool.NewWorkflow("retry")
	noteTask(w2, "x", 1, "")
	noteTask(w2, "y", 2, "", spool.After("x"))
	res2, err := c.InsertWorkflow(ctx, w2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobRetry(ctx, res2.Tasks["y"]); !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("retry of a waiting task: %v, want ErrInvalidState", err)
	}
	// Deleting a task that others wait for, or a waiting one, is refused:
	// its dependents would wait forever.
	for _, name := range []string{"x", "y"} {
		if _, err := c.JobDelete(ctx, res2.Tasks[name]); !errors.Is(err, spool.ErrInvalidState) {
			t.Fatalf("delete of task %s: %v, want ErrInvalidState", name, err)
		}
	}
	// Cancelling a task by id settles its dependents too.
	if _, err := c.JobCancel(ctx, res2.Tasks["x"]); err != nil {
		t.Fatal(err)
	}
	wantStates(t, be, res2.Tasks, map[string]backend.State{"y": backend.StateCancelled})
}

// testWorkflowCancelAndRetention: a workflow is cancelled whole (waiting,
// pending and running tasks); retention keeps a finished task while any
// task of its workflow is not final, and deletes it after.
func testWorkflowCancelRetention(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	w := spool.NewWorkflow("long")
	noteTask(w, "a", 1, "")
	noteTask(w, "b", 2, "")
	noteTask(w, "c", 3, "", spool.After("a"))
	noteTask(w, "d", 4, "", spool.After("c"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	plain := insert(t, c, NoteArgs{N: 100}, nil)
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 3 {
		t.Fatalf("claimed %d, want a, b and the plain job", len(rows))
	}
	var running *backend.JobRow
	for _, r := range rows {
		switch r.ID {
		case res.Tasks["a"], plain:
			finishRow(t, be, r, backend.OutcomeComplete)
		default:
			running = r
		}
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateCompleted, "b": backend.StateRunning, "c": backend.StateAvailable, "d": backend.StateWaiting})
	cleanup := func() int {
		time.Sleep(5 * time.Millisecond) // finalized_at must be older than the 1 ms retention
		n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Millisecond, DiscardedAge: time.Millisecond, CancelledAge: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := cleanup(); n != 1 {
		t.Fatalf("cleanup deleted %d, want only the plain job (the workflow is not final)", n)
	}
	getJob(t, be, res.Tasks["a"])
	n, err := c.WorkflowCancel(ctx, res.ID)
	if err != nil || n != 3 {
		t.Fatalf("cancel workflow: %d, %v; want 3 tasks (b running, c available, d waiting)", n, err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateCompleted, "b": backend.StateCancelled, "c": backend.StateCancelled, "d": backend.StateCancelled})
	if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: running.Lease(), Outcome: backend.OutcomeComplete}}}); err != nil || len(res.Rejected) != 1 {
		t.Fatalf("finish of a cancelled task: %v %v; want its lease rejected", res, err)
	}
	if _, err := c.WorkflowCancel(ctx, res.ID+1000); !errors.Is(err, spool.ErrWorkflowNotFound) {
		t.Fatalf("cancel of no workflow: %v", err)
	}
	if n := cleanup(); n != 4 {
		t.Fatalf("cleanup of the final workflow deleted %d, want 4", n)
	}
}

// testWorkflowRetry: a finished workflow's discarded and cancelled tasks
// run again, each after its retried dependencies (a dependent does not
// start before its dependency's new completion), completed tasks stay as
// they are; a workflow with a task not final, or one whose retried task
// would take back a unique key another job holds, is refused with nothing
// written.
func testWorkflowRetry(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	w := spool.NewWorkflow("again")
	noteTask(w, "a", 1, "")
	noteTask(w, "b", 2, "", spool.After("a"))
	noteTask(w, "c", 3, "", spool.After("b"))
	noteTask(w, "d", 4, "", spool.AfterAny("a"))
	noteTask(w, "e", 5, "")
	noteTask(w, "f", 6, "", spool.After("e"), spool.AfterAny("b"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	dumpOnFailure(t, be, res.Tasks)
	for _, r := range claimAll(t, be, spool.DefaultQueue) {
		o := backend.OutcomeComplete
		if r.ID == res.Tasks["a"] {
			o = backend.OutcomeDiscard
		}
		finishRow(t, be, r, o)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateDiscarded, "b": backend.StateCancelled, "c": backend.StateCancelled,
		"d": backend.StateAvailable, "e": backend.StateCompleted, "f": backend.StateAvailable})
	if _, err := c.WorkflowRetry(ctx, res.ID); !errors.Is(err, spool.ErrWorkflowNotFinal) || !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("retry of a workflow with available tasks: %v, want ErrWorkflowNotFinal", err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateDiscarded, "b": backend.StateCancelled, "d": backend.StateAvailable})
	for _, r := range claimAll(t, be, spool.DefaultQueue) {
		finishRow(t, be, r, backend.OutcomeComplete)
	}
	n, err := c.WorkflowRetry(ctx, res.ID)
	if err != nil || n != 3 {
		t.Fatalf("retry: %d, %v; want a, b and c", n, err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateAvailable, "b": backend.StateWaiting, "c": backend.StateWaiting,
		"d": backend.StateCompleted, "e": backend.StateCompleted, "f": backend.StateCompleted})
	if j := getJob(t, be, res.Tasks["a"]); j.Attempt != 0 || j.FinalizedAt != nil || !j.HasDependents {
		t.Fatalf("retried root: attempt %d finalized %v has_dependents %v; want 0, nil, true", j.Attempt, j.FinalizedAt, j.HasDependents)
	}
	// Each retried task starts only after its retried dependency's new
	// completion; the completed dependents of a (d) are not touched.
	for _, step := range []string{"a", "b", "c"} {
		rows := claimAll(t, be, spool.DefaultQueue)
		if len(rows) != 1 || rows[0].ID != res.Tasks[step] {
			t.Fatalf("claimed %v, want task %s alone", rows, step)
		}
		finishRow(t, be, rows[0], backend.OutcomeComplete)
	}
	for name, s := range states(t, be, res.Tasks) {
		if s != backend.StateCompleted {
			t.Fatalf("task %s ended %s, want every task completed", name, s)
		}
	}
	if n, err := c.WorkflowRetry(ctx, res.ID); err != nil || n != 0 {
		t.Fatalf("retry of a completed workflow: %d, %v; want 0, nil", n, err)
	}
	if _, err := c.WorkflowRetry(ctx, res.ID+1000); !errors.Is(err, spool.ErrWorkflowNotFound) {
		t.Fatalf("retry of no workflow: %v", err)
	}
	// A retried root task whose unique key another job took meanwhile
	// refuses the retry whole.
	w2 := spool.NewWorkflow("unique")
	w2.Add("u", NoteArgs{N: 7}, &spool.InsertOpts{Queue: "wfu", Unique: &spool.UniqueOpts{Key: "wf-retry-u"}})
	w2.Add("v", NoteArgs{N: 8}, &spool.InsertOpts{Queue: "wfu"}, spool.After("u"))
	res2, err := c.InsertWorkflow(ctx, w2)
	if err != nil {
		t.Fatal(err)
	}
	rows := claimAll(t, be, "wfu")
	if len(rows) != 1 {
		t.Fatalf("claimed %d, want task u", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeDiscard)
	insert(t, c, NoteArgs{N: 9}, &spool.InsertOpts{Queue: "other", Unique: &spool.UniqueOpts{Key: "wf-retry-u"}})
	if _, err := c.WorkflowRetry(ctx, res2.ID); !errors.Is(err, spool.ErrUniqueConflict) {
		t.Fatalf("retry of a task whose key is held: %v, want ErrUniqueConflict", err)
	}
	wantStates(t, be, res2.Tasks, map[string]backend.State{"u": backend.StateDiscarded, "v": backend.StateCancelled})
}

// testWorkflowTx: a workflow inserted in a transaction that rolls back
// leaves nothing; one that commits appears whole.
func testWorkflowTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	mk := func() *spool.Workflow {
		w := spool.NewWorkflow("tx")
		noteTask(w, "a", 1, "")
		noteTask(w, "b", 2, "", spool.After("a"))
		return w
	}
	tx := h.BeginTx(t, be)
	if _, err := c.InsertWorkflowTx(ctx, btx(tx), mk()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := be.JobList(ctx, &backend.JobListParams{}); len(rows) != 0 {
		t.Fatalf("after rollback: %d jobs", len(rows))
	}
	tx = h.BeginTx(t, be)
	res, err := c.InsertWorkflowTx(ctx, btx(tx), mk())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wantStates(t, be, res.Tasks, map[string]backend.State{"a": backend.StateAvailable, "b": backend.StateWaiting})
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 {
		t.Fatalf("claimed %d", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeComplete)
	wantStates(t, be, res.Tasks, map[string]backend.State{"b": backend.StateAvailable})
	if _, err := c.Workflow(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
}

// testWorkflowFlowRules: a task released by its dependency obeys its
// queue's rules: a paused queue keeps it, and a per-key limit of one runs
// a fan-out of one key one at a time; batch members obey them too.
func testWorkflowFlowRules(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	var running, most atomic.Int32
	done := make(chan int, 64)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		running.Add(-1)
		done <- j.Args.N
		return nil
	}))
	cfg := fastConfig(ws, 1)
	cfg.Queues = map[string]spool.QueueConfig{"flow": {MaxWorkers: 4, Flow: &spool.Flow{KeyLimit: 1}}}
	c := newClient(t, be, cfg)
	if err := c.QueuePause(ctx, "flow"); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	opts := &spool.InsertOpts{Queue: "flow", FlowKey: "k"}
	w := spool.NewWorkflow("fan")
	w.Add("root", NoteArgs{N: 0}, opts)
	for i := 1; i <= 4; i++ {
		w.Add(fmt.Sprint(i), NoteArgs{N: i}, opts, spool.After("root"))
	}
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertBatch(ctx, spool.BatchOpts{Name: "b"}, []spool.InsertManyParams{{Args: NoteArgs{N: 5}, InsertOpts: opts}, {Args: NoteArgs{N: 6}, InsertOpts: opts}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // five poll intervals: a paused queue runs nothing
	if j := getJob(t, be, res.Tasks["root"]); j.State != backend.StateAvailable {
		t.Fatalf("root in a paused queue: %s", j.State)
	}
	if err := c.QueueResume(ctx, "flow"); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		recv(t, done, "the flow queue's jobs")
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("%d jobs of one flow key ran at once under KeyLimit 1", m)
	}
	for name := range res.Tasks {
		waitState(t, be, res.Tasks[name], backend.StateCompleted)
	}
}

// CallbackArgs is the payload of the suite's batch callbacks.
type CallbackArgs struct {
	On string `json:"on"`
}

// Kind implements spool.JobArgs.
func (CallbackArgs) Kind() string { return "callback" }

// batchWorkers runs notes (mode "fail" discards) and callbacks, sending
// each callback's name and the batch it saw.
func batchWorkers(calls chan<- string, seen chan<- *spool.Batch) *spool.Workers {
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return spool.Discard(errors.New("member fails"))
		}
		return nil
	}))
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[CallbackArgs]) error {
		c, _ := spool.ClientFromContext(ctx)
		b, err := c.Batch(ctx, j.BatchID)
		if err != nil {
			return err
		}
		seen <- b
		calls <- j.Args.On
		return nil
	}))
	return ws
}

func callbacks() spool.BatchOpts {
	return spool.BatchOpts{
		OnSuccess:  &spool.BatchCallback{Args: CallbackArgs{On: "success"}},
		OnFailure:  &spool.BatchCallback{Args: CallbackArgs{On: "failure"}},
		OnComplete: &spool.BatchCallback{Args: CallbackArgs{On: "complete"}},
	}
}

// testBatchCallbacks: when every member of a batch is final, its success
// or failure callback and its completion callback run once, seeing the
// final counts; the callback that does not apply is gone.
func testBatchCallbacks(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	calls := make(chan string, 16)
	seen := make(chan *spool.Batch, 16)
	c := newClient(t, be, fastConfig(batchWorkers(calls, seen), 4))
	start(t, c)
	for _, tc := range []struct {
		modes []string
		want  []string
	}{
		{[]string{"", "", ""}, []string{"complete", "success"}},
		{[]string{"", "fail", ""}, []string{"complete", "failure"}},
	} {
		members := make([]spool.InsertManyParams, len(tc.modes))
		for i, m := range tc.modes {
			members[i] = spool.InsertManyParams{Args: NoteArgs{N: i, Mode: m}}
		}
		opts := callbacks()
		opts.Name = "batch"
		res, err := c.InsertBatch(ctx, opts, members)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range tc.want {
			got = append(got, recv(t, calls, "a callback"))
			b := recv(t, seen, "the callback's batch")
			if b.ID != res.ID || !b.Final() || b.Total != 3 || b.FinishedAt == nil {
				t.Fatalf("callback saw %+v", b)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("callbacks %v, want %v", got, tc.want)
		}
		b, err := c.Batch(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		if tc.want[1] == "failure" {
			failed = 1
		}
		if b.Completed != 3-failed || b.Discarded != failed || b.Cancelled != 0 {
			t.Fatalf("batch counts %+v", b)
		}
		dropped := b.OnFailure
		if failed == 1 {
			dropped = b.OnSuccess
		}
		if dropped != 0 {
			t.Fatalf("the callback that did not apply is still named: %+v", b)
		}
		members2, err := c.BatchMembers(ctx, res.ID, 0, 10)
		if err != nil || len(members2) != 3 {
			t.Fatalf("batch members: %d, %v", len(members2), err)
		}
	}
	select {
	case extra := <-calls:
		t.Fatalf("callback %q ran again", extra)
	case <-time.After(100 * time.Millisecond):
	}
	list, err := c.Batches(ctx, 0, 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("batch list: %d %v", len(list), err)
	}
	// Newest first, and pages below a cursor (on a sharded store, the
	// shards' lists merged by global id).
	if list[0].ID <= list[1].ID {
		t.Fatalf("batch list not newest first: %d, %d", list[0].ID, list[1].ID)
	}
	if page, err := c.Batches(ctx, 0, 1); err != nil || len(page) != 1 || page[0].ID != list[0].ID {
		t.Fatalf("first page of one: %v %v; want batch %d", page, err, list[0].ID)
	}
	if page, err := c.Batches(ctx, list[0].ID, 10); err != nil || len(page) != 1 || page[0].ID != list[1].ID {
		t.Fatalf("page below batch %d: %v %v; want batch %d", list[0].ID, page, err, list[1].ID)
	}
}

// testBatchOpen: an open batch takes members until sealed and runs no
// callback before, even with every member final; sealing it runs them; a
// sealed batch refuses members; an empty sealed batch is final at once.
func testBatchOpen(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{AllowUnknownKinds: true})
	ctx := context.Background()
	opts := callbacks()
	opts.Open = true
	res, err := c.InsertBatch(ctx, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BatchAdd(ctx, res.ID, Notes(1, 2)); err != nil {
		t.Fatal(err)
	}
	for _, r := range claimAll(t, be, spool.DefaultQueue) {
		finishRow(t, be, r, backend.OutcomeComplete)
	}
	b, err := c.Batch(ctx, res.ID)
	if err != nil || b.Completed != 2 || b.Total != 2 || b.Sealed || b.FinishedAt != nil {
		t.Fatalf("open batch with its members done: %+v %v", b, err)
	}
	if rows := claimAll(t, be, spool.DefaultQueue); len(rows) != 0 {
		t.Fatalf("an open batch's callbacks ran: %d claimed", len(rows))
	}
	if _, err := c.BatchAdd(ctx, res.ID, Notes(3, 1)); err != nil {
		t.Fatal(err)
	}
	b, err = c.BatchSeal(ctx, res.ID)
	if err != nil || !b.Sealed || b.FinishedAt != nil || b.Total != 3 {
		t.Fatalf("sealed with a member pending: %+v %v", b, err)
	}
	if _, err := c.BatchAdd(ctx, res.ID, Notes(4, 1)); !errors.Is(err, spool.ErrBatchSealed) {
		t.Fatalf("add to a sealed batch: %v, want ErrBatchSealed", err)
	}
	rows := claimAll(t, be, spool.DefaultQueue)
	if len(rows) != 1 {
		t.Fatalf("claimed %d, want the last member", len(rows))
	}
	finishRow(t, be, rows[0], backend.OutcomeComplete)
	rows = claimAll(t, be, spool.DefaultQueue)
	kinds := []string{}
	for _, r := range rows {
		kinds = append(kinds, r.Kind)
	}
	if len(rows) != 2 || kinds[0] != "callback" || kinds[1] != "callback" {
		t.Fatalf("after the last member: claimed %v, want the success and completion callbacks", kinds)
	}
	empty, err := c.InsertBatch(ctx, callbacks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Batch(ctx, empty.ID); err != nil || b.FinishedAt == nil || getJob(t, be, b.OnComplete).State != backend.StateAvailable {
		t.Fatalf("empty sealed batch: %+v %v", b, err)
	}
	if _, err := c.Batch(ctx, empty.ID+1000); !errors.Is(err, spool.ErrBatchNotFound) {
		t.Fatalf("no batch: %v", err)
	}
}

// testBatchExactlyOnce: members finished at once by several processes make
// the completion callback available exactly once.
func testBatchExactlyOnce(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	calls := make(chan string, 16)
	seen := make(chan *spool.Batch, 16)
	const members = 40
	var clients []*spool.Client
	for i := range 3 {
		b := be
		if i > 0 {
			b = h.Reopen(t, be)
		}
		clients = append(clients, newClient(t, b, fastConfig(batchWorkers(calls, seen), 8)))
	}
	_, err := clients[0].InsertBatch(ctx, spool.BatchOpts{OnComplete: &spool.BatchCallback{Args: CallbackArgs{On: "complete"}}}, Notes(0, members))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		start(t, c)
	}
	if got := recv(t, calls, "the completion callback"); got != "complete" {
		t.Fatalf("callback %q", got)
	}
	if b := recv(t, seen, "its batch"); b.Completed != members {
		t.Fatalf("callback saw %+v", b)
	}
	select {
	case extra := <-calls:
		t.Fatalf("callback %q ran twice", extra)
	case <-time.After(200 * time.Millisecond):
	}
	rows, err := be.JobList(ctx, &backend.JobListParams{Kind: "callback"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d callback rows (%v), want 1", len(rows), err)
	}
}
