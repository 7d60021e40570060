//go:build unix

package conformance

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// WorkflowChildEnv makes a backend's test binary a worker process of
// WorkflowUnderKills on the store whose URL the variable holds.
const WorkflowChildEnv = "SPOOL_WORKFLOW_CHILD_URL"

type stepArgs struct{}

func (stepArgs) Kind() string { return "step" }

// RunWorkflowChild is the worker process of WorkflowUnderKills: it opens
// the store at dsn with backend.Open, works steps (each 0 to 20 ms),
// printing "S id n" as each starts, n the dependencies it read not final
// (0 unless a task started too soon), until it is killed. A backend's
// test calls it when WorkflowChildEnv is set, and returns.
func RunWorkflowChild(dsn string) {
	ctx := context.Background()
	be, err := backend.Open(ctx, dsn)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[stepArgs]) error {
		// Each dependency as this start reads it, through another
		// connection: not final means it started too soon.
		deps, err := spool.DependencyOutputs(ctx)
		if err != nil {
			return err
		}
		early := 0
		for _, d := range deps {
			if !d.State.IsFinal() {
				early++
			}
		}
		mu.Lock()
		fmt.Printf("S %d %d\n", j.ID, early)
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 8}},
		LeaseDuration:  2 * time.Second,
		RescueInterval: 200 * time.Millisecond,
		PollInterval:   100 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if err := c.Start(ctx); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("ID", c.ID())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	_ = c.Stop(ctx)
	os.Exit(0)
}

// workflowChild is a running worker process and the starts it printed.
type workflowChild struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startWorkflowChild(t *testing.T, test, dsn string, starts chan<- [2]int64) *workflowChild {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), WorkflowChildEnv+"="+dsn)
	cmd.Stderr = ShownOnFailure(t, "child process stderr")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &workflowChild{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(c.done)
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			switch {
			case len(f) == 2 && f[0] == "ID":
				close(ready)
			case len(f) == 3 && f[0] == "S":
				id, _ := strconv.ParseInt(f[1], 10, 64)
				at, _ := strconv.ParseInt(f[2], 10, 64)
				starts <- [2]int64{id, at}
			}
		}
	}()
	select {
	case <-ready:
	case <-c.done:
		t.Fatalf("child exited before starting: %v", cmd.Wait())
	}
	return c
}

// WorkflowUnderKills: worker processes (the test binary of test, run
// again with WorkflowChildEnv set to dsn, the URL of be's store) run a
// workflow (a fan-out of 200 tasks with a fan-in, and 10 chains of 20) and
// 20 batches while one is killed with SIGKILL or stopped with SIGSTOP
// (longer than its lease) every 300 ms and replaced, twelve times. Every task completes,
// none left waiting; no start of any attempt of a task came before its
// dependencies' completions committed; each batch finished and has exactly
// one callback row.
func WorkflowUnderKills(t *testing.T, be backend.Backend, test, dsn string) {
	ctx := context.Background()
	client, err := spool.NewClient(be, &spool.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	w := spool.NewWorkflow("under kills")
	w.Add("root", stepArgs{}, nil)
	var ends []spool.Dep
	for i := range 200 {
		name := "fan" + strconv.Itoa(i)
		w.Add(name, stepArgs{}, nil, spool.After("root"))
		ends = append(ends, spool.After(name))
	}
	w.Add("end", stepArgs{}, nil, ends...)
	for c := range 10 {
		for i := range 20 {
			name := fmt.Sprintf("c%d.%d", c, i)
			if i == 0 {
				w.Add(name, stepArgs{}, nil)
			} else {
				w.Add(name, stepArgs{}, nil, spool.After(fmt.Sprintf("c%d.%d", c, i-1)))
			}
		}
	}
	wf, err := client.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	var batches []int64
	for range 20 {
		members := make([]spool.InsertManyParams, 10)
		for i := range members {
			members[i] = spool.InsertManyParams{Args: stepArgs{}}
		}
		b, err := client.InsertBatch(ctx, spool.BatchOpts{OnComplete: &spool.BatchCallback{Args: stepArgs{}}}, members)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b.ID)
	}

	starts := make(chan [2]int64, 100000)
	children := []*workflowChild{startWorkflowChild(t, test, dsn, starts), startWorkflowChild(t, test, dsn, starts)}
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			_ = c.cmd.Process.Signal(syscall.SIGCONT)
			_ = c.cmd.Wait()
		}
	})
	// Faults while the workflow runs, twelve at most; then it drains. The
	// run fails when no task finishes for 30 s, not at a fixed deadline: a
	// loaded machine restarts processes slowly.
	const maxFaults = 12
	faults, lastDone, lastMove := 0, int64(-1), time.Now()
	for {
		d, err := client.Workflow(ctx, wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Final() {
			break
		}
		if done := d.Counts[backend.StateCompleted]; done != lastDone {
			lastDone, lastMove = done, time.Now()
		} else if time.Since(lastMove) > 30*time.Second {
			t.Fatalf("no task finished for 30 s: %v; waiting with every dependency final (stranded): %v", d.Counts, stranded(d))
		}
		time.Sleep(300 * time.Millisecond)
		if faults == maxFaults {
			continue
		}
		victim := children[faults%len(children)]
		if faults%3 == 2 {
			// Stopped for longer than its lease: its jobs are rescued
			// and run elsewhere; its late finishes are fenced out.
			_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(2500 * time.Millisecond)
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		} else {
			_ = victim.cmd.Process.Signal(syscall.SIGKILL)
			_ = victim.cmd.Wait()
			children[faults%len(children)] = startWorkflowChild(t, test, dsn, starts)
		}
		faults++
	}
	// Then every batch finishes and its callback completes. As for the
	// workflow, the bound is on progress, not on the time: the run fails
	// when no job of the store completes for 30 s while a batch is open.
	open := map[int64]*spool.Batch{}
	for _, id := range batches {
		open[id] = nil
	}
	lastDone, lastMove = -1, time.Now()
	for len(open) > 0 {
		for id := range open {
			b, err := client.Batch(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			open[id] = b
			if b.FinishedAt != nil && b.OnComplete != 0 {
				if j, err := client.JobGet(ctx, b.OnComplete); err == nil && j.State == backend.StateCompleted {
					delete(open, id)
				}
			}
		}
		if len(open) == 0 {
			break
		}
		if done := countStates(t, be)[backend.StateCompleted]; done != lastDone {
			lastDone, lastMove = done, time.Now()
		} else if time.Since(lastMove) > 30*time.Second {
			for id, b := range open {
				t.Errorf("batch %d not finished with its callback completed: %+v", id, b)
			}
			logBatchMembers(t, be, open)
			t.Fatalf("no job completed for 30 s with %d batches open", len(open))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
		<-c.done
	}
	children = nil
	close(starts)

	d, err := client.Workflow(ctx, wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Counts[backend.StateCompleted] != int64(d.Tasks) {
		t.Fatalf("tasks by state %v, want all %d completed", d.Counts, d.Tasks)
	}
	parents := map[int64][]int64{}
	for _, e := range d.Edges {
		parents[e.Child] = append(parents[e.Child], e.Parent)
	}
	n := 0
	// A start is checked by what its handler read of its dependencies,
	// not by attempted_at: MySQL stamps a claim with its statement's start,
	// which can precede the commit whose row lock the claim waited for.
	for s := range starts {
		n++
		if s[1] != 0 {
			t.Errorf("task %d started while %d of its %d dependencies were not final", s[0], s[1], len(parents[s[0]]))
		}
	}
	callbacks, err := be.JobList(ctx, &backend.JobListParams{Kind: "step", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	waiting := 0
	for _, j := range callbacks {
		if j.State == backend.StateWaiting {
			waiting++
		}
	}
	want := len(d.Jobs) + 20*10 + 20 // tasks, members, one callback a batch
	if len(callbacks) != want || waiting != 0 {
		t.Fatalf("%d step jobs (%d waiting), want %d and none waiting", len(callbacks), waiting, want)
	}
	t.Logf("%d faults, %d starts recorded for %d jobs", faults, n, want)
}

// stranded lists the waiting tasks of d whose dependencies are all final:
// none should be.
func stranded(d *spool.WorkflowDetail) []int64 {
	byID := map[int64]*spool.JobRow{}
	for _, j := range d.Jobs {
		byID[j.ID] = j
	}
	open := map[int64]bool{}
	for _, e := range d.Edges {
		if p := byID[e.Parent]; p == nil || !p.State.IsFinal() {
			open[e.Child] = true
		}
	}
	var out []int64
	for _, j := range d.Jobs {
		if j.State == backend.StateWaiting && !open[j.ID] {
			out = append(out, j.ID)
		}
	}
	return out
}

// logBatchMembers logs every member and callback of the open batches that
// is not completed, with its lease and attempt: what a stalled batch waits
// for.
func logBatchMembers(t *testing.T, be backend.Backend, open map[int64]*spool.Batch) {
	t.Helper()
	callbacks := map[int64]int64{}
	for id, b := range open {
		if b != nil && b.OnComplete != 0 {
			callbacks[b.OnComplete] = id
		}
	}
	jobs, err := be.JobList(context.Background(), &backend.JobListParams{Kind: "step", Limit: 10000})
	if err != nil {
		t.Errorf("list jobs: %v", err)
		return
	}
	for _, j := range jobs {
		_, member := open[j.BatchID]
		batch, isCallback := callbacks[j.ID]
		if !member && !isCallback || j.State == backend.StateCompleted {
			continue
		}
		if member {
			batch = j.BatchID
		}
		until := "-"
		if j.LeasedUntil != nil {
			until = j.LeasedUntil.Format(time.RFC3339Nano)
		}
		t.Errorf("batch %d job %d (callback %v): state %s, attempt %d/%d, fence %d, run at %s, leased by %q until %s, deps left %d, has dependents %v, errors %v",
			batch, j.ID, isCallback, j.State, j.Attempt, j.MaxAttempts, j.Fence, j.RunAt.Format(time.RFC3339Nano), j.LeasedBy, until, j.DepsLeft, j.HasDependents, j.Errors)
	}
}
