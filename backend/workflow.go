package backend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Waiting jobs (the state StateWaiting) wait for one thing, named by their
// wait kind. WaitDeps: the job is a workflow task with unfinished
// dependencies, or a batch's callback before the batch is final.
const WaitDeps = "deps"

// DepFail says what a dependency that ends discarded or cancelled does to
// its dependent.
type DepFail uint8

// Failure policies of one edge.
const (
	// DepFailCancel cancels the dependent (and, through their own edges,
	// its dependents): the default.
	DepFailCancel DepFail = iota
	// DepFailDone counts the dependency as done, as a completion would.
	DepFailDone
)

// ErrBatchSealed means jobs were added to a batch that is sealed: its
// members are fixed, and its callbacks may have run.
var ErrBatchSealed = errors.New("batch is sealed")

// ErrBatchNotFound means no batch has the given id.
var ErrBatchNotFound = errors.New("batch not found")

// ErrWorkflowNotFound means no workflow has the given id.
var ErrWorkflowNotFound = errors.New("workflow not found")

// ErrWorkflowNotFinal means a workflow retry found a task that is not
// final: a workflow is retried once every task has ended. It matches
// ErrInvalidState too.
var ErrWorkflowNotFinal = fmt.Errorf("workflow has unfinished tasks: %w", ErrInvalidState)

// WorkflowDep is one dependency of a workflow task: the index (in
// WorkflowInsertParams.Tasks) of the task it waits for, and what that
// task's failure does to it.
type WorkflowDep struct {
	Task   int
	OnFail DepFail
}

// WorkflowTaskParams is one task of a workflow insert: its name (unique in
// the workflow), its job and its dependencies. A task with dependencies is
// inserted waiting, with deps_left the number of its dependencies; one
// without is inserted as a plain job would be. Every task with dependents
// is flagged (has_dependents), so its finish settles them.
type WorkflowTaskParams struct {
	Name string
	Job  *JobInsertParams
	Deps []WorkflowDep
}

// WorkflowInsertParams inserts a workflow whole, in one transaction (the
// caller's when Tx is set). All fields are already validated: names are
// unique, dependencies name earlier or later tasks of the call and form no
// cycle, and no task with dependencies has a unique key.
type WorkflowInsertParams struct {
	Tx    Tx
	Name  string
	Tasks []WorkflowTaskParams
}

// WorkflowInsertResult is the new workflow's id and its tasks' job ids, in
// input order.
type WorkflowInsertResult struct {
	ID  int64
	IDs []int64
}

// WorkflowSummary is a workflow and its tasks' counts by state.
type WorkflowSummary struct {
	ID        int64           `json:"id"`
	Name      string          `json:"name"`
	CreatedAt time.Time       `json:"created_at"`
	Tasks     int             `json:"tasks"`
	Counts    map[State]int64 `json:"counts"`
}

// Final reports whether every task of the workflow is finished.
func (w *WorkflowSummary) Final() bool {
	var done int64
	for s, n := range w.Counts {
		if s == StateCompleted || s == StateDiscarded || s == StateCancelled {
			done += n
		}
	}
	return done >= int64(w.Tasks)
}

// WorkflowEdge is one dependency: Child waits for Parent (job ids).
type WorkflowEdge struct {
	Parent int64   `json:"parent"`
	Child  int64   `json:"child"`
	OnFail DepFail `json:"on_fail"`
}

// WorkflowDetail is a workflow with its tasks (their jobs, by id) and
// edges.
type WorkflowDetail struct {
	WorkflowSummary
	Jobs  []*JobRow      `json:"jobs"`
	Edges []WorkflowEdge `json:"edges"`
}

// WorkflowListParams pages a workflow listing, newest first.
type WorkflowListParams struct {
	BeforeID int64 // 0: from the newest
	Limit    int   // 0: DefaultListLimit
}

// DependencyOutput is one dependency of a job as the job reads it: its
// workflow task name, state and recorded output.
type DependencyOutput struct {
	JobID  int64           `json:"job_id"`
	Task   string          `json:"task"`
	State  State           `json:"state"`
	Output json.RawMessage `json:"output,omitempty"`
}

// BatchCallbacks are the callback jobs of a batch, each nil for none. Each
// is inserted waiting and made available exactly once, by the write that
// makes the sealed batch final, if its condition holds; one whose
// condition does not hold is deleted in that write. A callback carries its
// batch's id (JobRow.BatchID) but is no member.
type BatchCallbacks struct {
	// OnSuccess runs when every member completed.
	OnSuccess *JobInsertParams
	// OnFailure runs when at least one member was discarded or cancelled.
	OnFailure *JobInsertParams
	// OnComplete runs once every member is final, whatever their states.
	OnComplete *JobInsertParams
}

// BatchInsertParams creates a batch with its first members and its
// callbacks, in one transaction (the caller's when Tx is set). A sealed
// batch takes no more members; an open one takes them through BatchAdd
// until BatchSeal. A batch's callbacks can run only once it is sealed.
type BatchInsertParams struct {
	Tx        Tx
	Name      string
	Jobs      []*JobInsertParams
	Callbacks BatchCallbacks
	Sealed    bool
}

// BatchAddParams adds members to an open batch.
type BatchAddParams struct {
	Tx   Tx
	ID   int64
	Jobs []*JobInsertParams
}

// Batch is a batch's progress: members by final state, and what became of
// its callbacks.
type Batch struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	Sealed    bool      `json:"sealed"`
	// Total is how many members were added (duplicates of unique jobs
	// held elsewhere are not members).
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Discarded int `json:"discarded"`
	Cancelled int `json:"cancelled"`
	// FinishedAt is when the batch became final (sealed, every member
	// final) and its callbacks were settled; nil before.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Callback job ids, 0 for none (or one deleted because its condition
	// did not hold).
	OnSuccess  int64 `json:"on_success,omitempty"`
	OnFailure  int64 `json:"on_failure,omitempty"`
	OnComplete int64 `json:"on_complete,omitempty"`
}

// IsCallback reports whether the job id is one of b's callbacks (which
// carry the batch's id but are not members).
func (b *Batch) IsCallback(id int64) bool {
	return id != 0 && (id == b.OnSuccess || id == b.OnFailure || id == b.OnComplete)
}

// Final reports whether every member is final.
func (b *Batch) Final() bool { return b.Completed+b.Discarded+b.Cancelled >= b.Total }

// BatchInsertResult is the new batch's id and its members' ids (for a
// unique job whose key was held, the holder's, with Duplicates true; such
// a job is not a member).
type BatchInsertResult struct {
	ID         int64
	IDs        []int64
	Duplicates []bool
}

// BatchListParams pages a batch listing, newest first.
type BatchListParams struct {
	BeforeID int64
	Limit    int
}

// BatchMembersParams pages a batch's members in id order.
type BatchMembersParams struct {
	ID      int64
	AfterID int64
	Limit   int
}

// WorkflowStore is the part of a store that keeps workflows and batches
// (every Backend embeds it):
// jobs that wait (StateWaiting) for other jobs, and the writes that end the
// wait. Its invariants, on every store:
//   - No claim reads a waiting job.
//   - A waiting task becomes pending in the transaction that writes its
//     last dependency's final state, and a batch's callbacks in the one
//     that makes the sealed batch final; the row lock on the waiting job
//     (or the batch) makes that happen once.
//   - A finish of a job without dependents (not flagged has_dependents)
//     runs the statements it ran before workflows existed.
type WorkflowStore interface {
	// WorkflowInsert inserts a workflow whole, or nothing.
	WorkflowInsert(ctx context.Context, p *WorkflowInsertParams) (*WorkflowInsertResult, error)
	// WorkflowGet returns a workflow with its tasks and edges, or an error
	// matching ErrWorkflowNotFound.
	WorkflowGet(ctx context.Context, id int64) (*WorkflowDetail, error)
	// WorkflowList lists workflows, newest first.
	WorkflowList(ctx context.Context, p *WorkflowListParams) ([]*WorkflowSummary, error)
	// WorkflowCancel cancels every task of a workflow that is not final
	// (waiting, pending or running: a running task's holder learns of it
	// as from JobCancel) and returns how many it cancelled.
	WorkflowCancel(ctx context.Context, id int64) (int, error)
	// WorkflowRetry retries, in one transaction, every discarded and
	// cancelled task of a workflow whose tasks are all final, as
	// PlanWorkflowRetry says, and returns how many it retried. It fails
	// with ErrWorkflowNotFound, ErrWorkflowNotFinal (nothing written), or
	// ErrUniqueConflict when a retried task would take back a unique key
	// another job holds (nothing written).
	WorkflowRetry(ctx context.Context, id int64) (int, error)
	// JobDependencies lists the dependencies of a job with their outputs.
	JobDependencies(ctx context.Context, id int64) ([]DependencyOutput, error)

	// BatchInsert creates a batch.
	BatchInsert(ctx context.Context, p *BatchInsertParams) (*BatchInsertResult, error)
	// BatchAdd adds members to an open batch: ErrBatchSealed for a sealed
	// one, ErrBatchNotFound for none.
	BatchAdd(ctx context.Context, p *BatchAddParams) (*JobInsertManyResult, error)
	// BatchSeal seals a batch (sealing a sealed one changes nothing) and
	// settles its callbacks if every member is final.
	BatchSeal(ctx context.Context, id int64) (*Batch, error)
	// BatchGet returns a batch's progress or ErrBatchNotFound.
	BatchGet(ctx context.Context, id int64) (*Batch, error)
	// BatchList lists batches, newest first.
	BatchList(ctx context.Context, p *BatchListParams) ([]*Batch, error)
	// BatchMembers lists a batch's members in id order.
	BatchMembers(ctx context.Context, p *BatchMembersParams) ([]*JobRow, error)
}

// IsFinal reports whether s is a final state.
func (s State) IsFinal() bool {
	return s == StateCompleted || s == StateDiscarded || s == StateCancelled
}

// RetryTask is one task a workflow retry changes: it waits for DepsLeft
// retried dependencies (0: available now), and HasDependents flags it when
// a retried task depends on it.
type RetryTask struct {
	ID            int64
	DepsLeft      int
	HasDependents bool
}

// PlanWorkflowRetry says what retrying a workflow changes, given its tasks'
// states by job id and its edges: every discarded or cancelled task runs
// again with a fresh set of attempts, after those of its dependencies that
// run again (whatever their edges' failure policy: a retried dependency is
// waited for anew); one with none to wait for is available at once. The
// dependencies that completed stay done and are not settled again (their
// flag stays clear). A retried task's finish settles its retried
// dependents only: settling reads only waiting dependents, and a
// dependent that is not retried is final. An edge whose parent is gone
// (deleted) counts as done. The tasks come in id order (the order rows are
// locked in). It fails with ErrWorkflowNotFinal when a task is not final.
func PlanWorkflowRetry(states map[int64]State, edges []WorkflowEdge) ([]RetryTask, error) {
	retried := func(id int64) bool {
		s, ok := states[id]
		return ok && (s == StateDiscarded || s == StateCancelled)
	}
	for id, s := range states {
		if !s.IsFinal() {
			return nil, fmt.Errorf("task %d is %s: %w", id, s, ErrWorkflowNotFinal)
		}
	}
	plan := map[int64]*RetryTask{}
	for id := range states {
		if retried(id) {
			plan[id] = &RetryTask{ID: id}
		}
	}
	for _, e := range edges {
		if retried(e.Parent) && retried(e.Child) {
			plan[e.Child].DepsLeft++
			plan[e.Parent].HasDependents = true
		}
	}
	out := make([]RetryTask, 0, len(plan))
	for _, t := range plan {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b RetryTask) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
