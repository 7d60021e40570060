package backend

import (
	"errors"
	"fmt"
	"testing"
)

// TestPlanWorkflowRetry: failed tasks wait for their retried dependencies
// only (a completed one, or one deleted, is done), whatever the edge's
// policy; a task with retried dependents is flagged; a task not final
// refuses the plan.
func TestPlanWorkflowRetry(t *testing.T) {
	// 1 discarded → 2 cancelled → 3 cancelled; 1 →(any) 4 completed;
	// 5 completed → 3; 9 (deleted) → 2.
	states := map[int64]State{1: StateDiscarded, 2: StateCancelled, 3: StateCancelled, 4: StateCompleted, 5: StateCompleted}
	edges := []WorkflowEdge{{Parent: 1, Child: 2}, {Parent: 2, Child: 3, OnFail: DepFailDone}, {Parent: 1, Child: 4, OnFail: DepFailDone},
		{Parent: 5, Child: 3}, {Parent: 9, Child: 2}}
	plan, err := PlanWorkflowRetry(states, edges)
	if err != nil {
		t.Fatal(err)
	}
	want := []RetryTask{{ID: 1, DepsLeft: 0, HasDependents: true}, {ID: 2, DepsLeft: 1, HasDependents: true}, {ID: 3, DepsLeft: 1}}
	if fmt.Sprint(plan) != fmt.Sprint(want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	states[4] = StateRunning
	if _, err := PlanWorkflowRetry(states, edges); !errors.Is(err, ErrWorkflowNotFinal) || !errors.Is(err, ErrInvalidState) {
		t.Fatalf("a running task: %v, want ErrWorkflowNotFinal", err)
	}
}
