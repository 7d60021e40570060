package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// TestLeasedWorkflowTasks follows a chain of three workflow tasks through
// lease rows (schema 28): each is claimed into a lease row; the graph and
// the list read a leased task as running; a's finish in its lease row
// (complete_deps_leased.sql) and b's in place (its record moved it back)
// each settle their dependent; retention keeps the finished tasks while c
// runs; DependencyOutput reads b's output; a retry is refused while c
// runs; the workflow's cancel reaches c in its lease row, and c's finish is
// then refused.
func TestLeasedWorkflowTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := leaseRowsBackend(t)
	job := wfJob
	w, err := be.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "chain", Tasks: []backend.WorkflowTaskParams{
		{Name: "a", Job: job()},
		{Name: "b", Job: job(), Deps: []backend.WorkflowDep{{Task: 0}}},
		{Name: "c", Job: job(), Deps: []backend.WorkflowDep{{Task: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(want int64, deps bool) *backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "wf", Max: 10, Lease: time.Minute, ClaimID: "c#1"})
		if err != nil || len(rows) != 1 || rows[0].ID != want {
			t.Fatalf("claim: %v, %v; want job %d alone", rows, err, want)
		}
		if leased, inPlace := leaseRowsState(t, be); leased != 1 || inPlace != 0 {
			t.Fatalf("after claiming job %d: %d jobs in lease rows and %d running in place, want 1 and 0", want, leased, inPlace)
		}
		if r := rows[0]; r.WorkflowID != w.ID || r.HasDependents != deps {
			t.Fatalf("claimed job %d: workflow %d, has dependents %v; want %d and %v", r.ID, r.WorkflowID, r.HasDependents, w.ID, deps)
		}
		return rows[0]
	}
	state := func(id int64) backend.State {
		t.Helper()
		d, err := be.WorkflowGet(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range d.Jobs {
			if j.ID == id {
				return j.State
			}
		}
		t.Fatalf("job %d missing from its workflow's graph (%d tasks)", id, len(d.Jobs))
		return ""
	}
	finish := func(j *backend.JobRow) *backend.JobFinishManyResult {
		t.Helper()
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
			{Lease: backend.LeaseRef{ID: j.ID, Fence: j.Fence}, Outcome: backend.OutcomeComplete}}})
		if err != nil {
			t.Fatalf("finish job %d: %v", j.ID, err)
		}
		return res
	}

	a := claim(w.IDs[0], true)
	if s := state(a.ID); s != backend.StateRunning {
		t.Fatalf("leased task a read as %s, want running", s)
	}
	if res := finish(a); len(res.Rejected) != 0 {
		t.Fatalf("finish of a in its lease row rejected: %+v", res)
	}
	if sa, sb := state(a.ID), state(w.IDs[1]); sa != backend.StateCompleted || sb != backend.StateAvailable {
		t.Fatalf("after a's finish: a %s, b %s; want completed, available", sa, sb)
	}

	b := claim(w.IDs[1], true)
	// The record moves b back in place (as it moves any leased job); its
	// finish then takes finish_deps.sql's path.
	if ok, err := be.JobRecord(ctx, &backend.JobRecordParams{Lease: backend.LeaseRef{ID: b.ID, Fence: b.Fence}, Output: json.RawMessage(`{"n":1}`)}); err != nil || !ok {
		t.Fatalf("record b's output: %v, %v", ok, err)
	}
	if res := finish(b); len(res.Rejected) != 0 {
		t.Fatalf("finish of b in place rejected: %+v", res)
	}

	c := claim(w.IDs[2], false)
	ws, err := be.WorkflowList(ctx, &backend.WorkflowListParams{})
	if err != nil || len(ws) != 1 || ws[0].Counts[backend.StateRunning] != 1 || ws[0].Counts[backend.StateCompleted] != 2 {
		t.Fatalf("workflow list while c is leased: %+v, %v; want 1 running, 2 completed", ws, err)
	}
	deps, err := be.JobDependencies(ctx, c.ID)
	if err != nil || len(deps) != 1 || deps[0].JobID != b.ID || string(deps[0].Output) != `{"n": 1}` {
		t.Fatalf("c's dependencies: %+v, %v; want b with its output", deps, err)
	}
	if _, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{a.ID, b.ID} {
		if _, err := be.JobGet(ctx, id); err != nil {
			t.Fatalf("job %d, completed, read after a cleanup while c runs leased: %v (retention keeps a workflow whole)", id, err)
		}
	}
	if _, err := be.WorkflowRetry(ctx, w.ID); !errors.Is(err, backend.ErrWorkflowNotFinal) {
		t.Fatalf("retry while c runs leased: %v, want ErrWorkflowNotFinal", err)
	}
	if leased, _ := leaseRowsState(t, be); leased != 1 {
		t.Fatalf("after the refused retry: %d jobs in lease rows, want c's 1 (the retry wrote nothing)", leased)
	}
	n, err := be.WorkflowCancel(ctx, w.ID)
	if err != nil || n != 1 {
		t.Fatalf("cancel: %d, %v; want c", n, err)
	}
	if sc := state(c.ID); sc != backend.StateCancelled {
		t.Fatalf("after the cancel: c %s, want cancelled", sc)
	}
	if res := finish(c); len(res.Rejected) != 1 {
		t.Fatalf("finish of the cancelled c: %+v; want it rejected", res)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 0 || inPlace != 0 {
		t.Fatalf("at the end: %d jobs in lease rows and %d running in place, want none", leased, inPlace)
	}
}

// leaseRowsBackend is a fresh backend whose every claim takes lease rows:
// by default a claim after one of fewer than 32 jobs takes the small
// form, in place.
func leaseRowsBackend(t *testing.T) *postgres.Backend {
	t.Helper()
	base := newBackend(t)
	be, err := postgres.New(base.Pool(), &postgres.Options{Schema: base.Schema(), Claims: postgres.ClaimsLeaseRows})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// wfJob is a workflow task's job: queue "wf", kind "note".
func wfJob() *backend.JobInsertParams {
	return &backend.JobInsertParams{Queue: "wf", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
}
