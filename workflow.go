package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Workflow limits: a workflow over them is refused with ErrWorkflowTooLarge
// and nothing is written.
const (
	// MaxWorkflowTasks is the most tasks one workflow may have.
	MaxWorkflowTasks = 100_000
	// MaxWorkflowEdges is the most dependencies, over all its tasks, one
	// workflow may have.
	MaxWorkflowEdges = 1_000_000
	// MaxTaskNameLen is the longest task name, in bytes.
	MaxTaskNameLen = 128
)

// Workflow errors; each is returned wrapped in a *WorkflowError, and nothing
// is written.
var (
	// ErrWorkflowCycle: the dependencies form a cycle.
	ErrWorkflowCycle = errors.New("workflow dependencies form a cycle")
	// ErrWorkflowUnknownDep: a task depends on a task the workflow does
	// not have.
	ErrWorkflowUnknownDep = errors.New("workflow task depends on an unknown task")
	// ErrWorkflowTooLarge: more tasks or dependencies than the limits.
	ErrWorkflowTooLarge = errors.New("workflow is too large")
	// ErrWorkflowInvalid: an empty workflow, an empty, long or repeated
	// task name, a repeated dependency, or a task with dependencies that
	// has a unique key (a waiting task holds no key, so two could become
	// pending with one key).
	ErrWorkflowInvalid = errors.New("invalid workflow")
	// ErrWorkflowNotFound: no workflow has the given id.
	ErrWorkflowNotFound = backend.ErrWorkflowNotFound
	// ErrNoDependency: DependencyOutput named a task the running job does
	// not depend on, or one that recorded no output.
	ErrNoDependency = errors.New("no such dependency output")
)

// WorkflowError reports a workflow refused before anything was written:
// Task names the task at fault (empty when the whole workflow is), Err is
// one of the workflow errors above or, for a task whose job is invalid, an
// *InvalidJobError.
type WorkflowError struct {
	Workflow string
	Task     string
	Reason   string
	Err      error
}

func (e *WorkflowError) Error() string {
	if e.Task == "" {
		return fmt.Sprintf("workflow %q: %s", e.Workflow, e.Reason)
	}
	return fmt.Sprintf("workflow %q: task %q: %s", e.Workflow, e.Task, e.Reason)
}

// Unwrap returns the specific error.
func (e *WorkflowError) Unwrap() error { return e.Err }

// FailPolicy is what a dependency that ends discarded or cancelled does to
// the task that depends on it.
type FailPolicy uint8

const (
	// CancelDependents cancels the dependent task, and through it every
	// task that depends on it by this policy: the default.
	CancelDependents FailPolicy = FailPolicy(backend.DepFailCancel)
	// TreatAsDone counts the failed dependency as done: the dependent runs
	// once its other dependencies are done, and may read what the failed
	// one recorded.
	TreatAsDone FailPolicy = FailPolicy(backend.DepFailDone)
)

// Dep is one dependency of a task: the task it waits for and what that
// task's failure does to it.
type Dep struct {
	Task   string
	OnFail FailPolicy
}

// After is a dependency on task, cancelling the dependent if task fails.
func After(task string) Dep { return Dep{Task: task} }

// AfterAny is a dependency on task that counts it as done however it ends
// (completed, discarded or cancelled).
func AfterAny(task string) Dep { return Dep{Task: task, OnFail: TreatAsDone} }

// Workflow is a set of tasks (jobs) with dependencies between them, built
// with NewWorkflow and Add and inserted whole by Client.InsertWorkflow. A
// task waits (JobStateWaiting, which no claim reads) until each of its
// dependencies has completed, and becomes available in the transaction
// that writes the last one's completion.
type Workflow struct {
	name  string
	tasks []workflowTask
}

type workflowTask struct {
	name string
	args JobArgs
	opts *InsertOpts
	deps []Dep
}

// NewWorkflow starts an empty workflow; name is for people (listings, the
// dashboard) and need not be unique.
func NewWorkflow(name string) *Workflow { return &Workflow{name: name} }

// Add adds a task named name (unique in the workflow) that runs args with
// opts once deps are done, and returns w. Dependencies may name tasks added
// later; they are checked by InsertWorkflow.
func (w *Workflow) Add(name string, args JobArgs, opts *InsertOpts, deps ...Dep) *Workflow {
	w.tasks = append(w.tasks, workflowTask{name: name, args: args, opts: opts, deps: deps})
	return w
}

// Name returns the workflow's name.
func (w *Workflow) Name() string { return w.name }

// Len returns how many tasks w has.
func (w *Workflow) Len() int { return len(w.tasks) }

// WorkflowResult is an inserted workflow: its id and its tasks' job ids by
// name.
type WorkflowResult struct {
	ID    int64
	Tasks map[string]int64
}

// InsertWorkflow validates w and inserts it whole in one transaction:
// every task or none. A workflow with a cycle, an unknown dependency, too
// many tasks, or an invalid task is refused with a *WorkflowError and
// nothing is written. A task with a unique key whose key is held refuses
// the workflow with ErrUniqueConflict.
func (c *Client) InsertWorkflow(ctx context.Context, w *Workflow) (*WorkflowResult, error) {
	return c.insertWorkflow(ctx, nil, w)
}

// InsertWorkflowTx is InsertWorkflow inside the caller's transaction.
func (c *Client) InsertWorkflowTx(ctx context.Context, tx any, w *Workflow) (*WorkflowResult, error) {
	if tx == nil {
		return nil, fmt.Errorf("insert workflow: %w: nil transaction", ErrTxType)
	}
	return c.insertWorkflow(ctx, tx, w)
}

func (c *Client) insertWorkflow(ctx context.Context, tx any, w *Workflow) (*WorkflowResult, error) {
	p, err := c.buildWorkflow(w)
	if err != nil {
		return nil, fmt.Errorf("insert workflow: %w", err)
	}
	p.Tx = tx
	res, err := c.backend.WorkflowInsert(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("insert workflow %q: %w", w.name, err)
	}
	out := &WorkflowResult{ID: res.ID, Tasks: make(map[string]int64, len(w.tasks))}
	rows := make([]*backend.JobInsertParams, len(p.Tasks))
	for i, t := range p.Tasks {
		out.Tasks[t.Name] = res.IDs[i]
		rows[i] = t.Job
	}
	if tx == nil {
		c.engine.WakeInserted(rows)
	}
	c.observers.inserted(rows)
	return out, nil
}

// buildWorkflow validates w: its size, names, dependencies (known, not
// repeated, acyclic) and each task's job.
func (c *Client) buildWorkflow(w *Workflow) (*backend.WorkflowInsertParams, error) {
	bad := func(task string, err error, format string, args ...any) error {
		return &WorkflowError{Workflow: w.name, Task: task, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	switch {
	case len(w.tasks) == 0:
		return nil, bad("", ErrWorkflowInvalid, "a workflow needs at least one task")
	case len(w.tasks) > MaxWorkflowTasks:
		return nil, bad("", ErrWorkflowTooLarge, "%d tasks, over the limit of %d", len(w.tasks), MaxWorkflowTasks)
	}
	index := make(map[string]int, len(w.tasks))
	edges := 0
	for i, t := range w.tasks {
		if t.name == "" || len(t.name) > MaxTaskNameLen || !printable(t.name) {
			return nil, bad(t.name, ErrWorkflowInvalid, "a task name must be 1 to %d bytes of printable text", MaxTaskNameLen)
		}
		if _, dup := index[t.name]; dup {
			return nil, bad(t.name, ErrWorkflowInvalid, "task name used twice")
		}
		index[t.name] = i
		edges += len(t.deps)
	}
	if edges > MaxWorkflowEdges {
		return nil, bad("", ErrWorkflowTooLarge, "%d dependencies, over the limit of %d", edges, MaxWorkflowEdges)
	}
	p := &backend.WorkflowInsertParams{Name: w.name, Tasks: make([]backend.WorkflowTaskParams, len(w.tasks))}
	for i, t := range w.tasks {
		job, deb, err := c.buildInsert(t.args, t.opts)
		if err == nil && deb != nil {
			err = invalid("unique", nil, "a workflow task cannot be debounced")
		}
		if err != nil {
			return nil, bad(t.name, err, "%v", err)
		}
		if len(t.deps) > 0 && job.UniqueKey != "" {
			return nil, bad(t.name, ErrWorkflowInvalid, "a task with dependencies cannot have a unique key (it would hold none while it waits)")
		}
		tp := backend.WorkflowTaskParams{Name: t.name, Job: job, Deps: make([]backend.WorkflowDep, len(t.deps))}
		seen := make(map[int]bool, len(t.deps))
		for k, d := range t.deps {
			j, ok := index[d.Task]
			switch {
			case !ok:
				return nil, bad(t.name, ErrWorkflowUnknownDep, "depends on %q, which the workflow does not have", d.Task)
			case j == i:
				return nil, bad(t.name, ErrWorkflowCycle, "depends on itself")
			case seen[j]:
				return nil, bad(t.name, ErrWorkflowInvalid, "depends on %q twice", d.Task)
			case d.OnFail != CancelDependents && d.OnFail != TreatAsDone:
				return nil, bad(t.name, ErrWorkflowInvalid, "unknown failure policy %d on %q", d.OnFail, d.Task)
			}
			seen[j] = true
			tp.Deps[k] = backend.WorkflowDep{Task: j, OnFail: backend.DepFail(d.OnFail)}
		}
		p.Tasks[i] = tp
	}
	if cyc := findCycle(p.Tasks); cyc >= 0 {
		return nil, bad(p.Tasks[cyc].Name, ErrWorkflowCycle, "is on a cycle of dependencies")
	}
	return p, nil
}

// findCycle returns the index of a task on a cycle, or -1 (Kahn's
// algorithm: what is left after removing every task whose dependencies are
// removed is on or behind a cycle; one on it is found by walking
// dependencies from there).
func findCycle(tasks []backend.WorkflowTaskParams) int {
	n := len(tasks)
	left := make([]int, n)
	children := make([][]int, n)
	for i, t := range tasks {
		left[i] = len(t.Deps)
		for _, d := range t.Deps {
			children[d.Task] = append(children[d.Task], i)
		}
	}
	queue := make([]int, 0, n)
	for i := range tasks {
		if left[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		for _, c := range children[queue[k]] {
			if left[c]--; left[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if len(queue) == n {
		return -1
	}
	// Walk back along dependencies that are not removed: a walk of n
	// steps in a finite graph ends on a cycle.
	at := -1
	for i := range tasks {
		if left[i] > 0 {
			at = i
			break
		}
	}
	for step := 0; step < n; step++ {
		for _, d := range tasks[at].Deps {
			if left[d.Task] > 0 {
				at = d.Task
				break
			}
		}
	}
	return at
}

// WorkflowSummary is a workflow and its tasks' counts by state.
type WorkflowSummary = backend.WorkflowSummary

// WorkflowDetail is a workflow with its tasks' jobs and its edges.
type WorkflowDetail = backend.WorkflowDetail

// Workflow returns a workflow with its tasks and edges, or an error
// matching ErrWorkflowNotFound.
func (c *Client) Workflow(ctx context.Context, id int64) (*WorkflowDetail, error) {
	return c.backend.WorkflowGet(ctx, id)
}

// Workflows lists workflows, newest first, limit at a time (0: 100) before
// the id beforeID (0: from the newest).
func (c *Client) Workflows(ctx context.Context, beforeID int64, limit int) ([]*WorkflowSummary, error) {
	return c.backend.WorkflowList(ctx, &backend.WorkflowListParams{BeforeID: beforeID, Limit: limit})
}

// WorkflowCancel cancels every task of a workflow that is not finished
// (waiting, pending or running; running handlers are stopped as by
// JobCancel) and returns how many it cancelled.
func (c *Client) WorkflowCancel(ctx context.Context, id int64) (int, error) {
	n, err := c.backend.WorkflowCancel(ctx, id)
	if err == nil && n > 0 {
		c.engine.Cancelled(0)
	}
	return n, err
}

// ErrWorkflowNotFinal: WorkflowRetry on a workflow with a task not final
// (waiting, pending or running). It matches ErrInvalidState too.
var ErrWorkflowNotFinal = backend.ErrWorkflowNotFinal

// WorkflowRetry reruns a finished workflow's failures: every discarded
// and cancelled task runs again with a fresh set of attempts, after those
// of its dependencies that run again (a task whose dependencies all
// completed is available at once; the others wait, as at insert), in one
// transaction. Completed tasks are not rerun, and their outputs stay for
// their dependents to read. It returns how many tasks it retried (0 when
// none failed). Every task must be final: otherwise it fails with an error
// matching ErrWorkflowNotFinal (cancel the workflow first, or wait), and
// nothing is written; so it does when a retried task would take back a
// unique key another job holds (ErrUniqueConflict). ErrWorkflowNotFound
// when there is no such workflow.
//
// JobRetry of one task reruns that task alone: its dependents, cancelled
// when it failed, stay cancelled.
func (c *Client) WorkflowRetry(ctx context.Context, id int64) (int, error) {
	n, err := c.backend.WorkflowRetry(ctx, id)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		c.engine.WakeAll()
	}
	return n, nil
}

// DependencyOutput decodes the output recorded by the dependency named task
// of the running workflow task whose context ctx is. It fails with
// ErrNotInJob outside a job and ErrNoDependency when the job has no such
// dependency or it recorded no output.
func DependencyOutput[T any](ctx context.Context, task string) (T, error) {
	var zero T
	deps, err := DependencyOutputs(ctx)
	if err != nil {
		return zero, err
	}
	for _, d := range deps {
		if d.Task != task {
			continue
		}
		if len(d.Output) == 0 {
			return zero, fmt.Errorf("dependency output %q: it recorded none (it ended %s): %w", task, d.State, ErrNoDependency)
		}
		var v T
		if err := json.Unmarshal(d.Output, &v); err != nil {
			return zero, fmt.Errorf("dependency output %q: decode: %w", task, err)
		}
		return v, nil
	}
	return zero, fmt.Errorf("dependency output %q: %w", task, ErrNoDependency)
}

// DependencyState is one dependency of a running workflow task: its task
// name, job id, final state and recorded output.
type DependencyState = backend.DependencyOutput

// DependencyOutputs lists the dependencies of the running workflow task
// whose context ctx is, with their states and outputs.
func DependencyOutputs(ctx context.Context) ([]DependencyState, error) {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("dependency outputs: %w", ErrNotInJob)
	}
	c, ok := ClientFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("dependency outputs: %w", ErrNotInJob)
	}
	deps, err := c.backend.JobDependencies(ctx, run.ID())
	if err != nil {
		return nil, fmt.Errorf("dependency outputs of job %d: %w", run.ID(), err)
	}
	return deps, nil
}
