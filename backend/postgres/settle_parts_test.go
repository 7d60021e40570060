package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// TestSettleInParts finishes ten roots of four tasks each in one batch,
// with parts of about eight settled rows (two roots): the batch is written
// in several transactions, and each task is released in the transaction
// that completed its root (the same xmin), so none is available before
// its dependency's completion commits.
func TestSettleInParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := leaseRowsBackend(t)
	postgres.SetSettleParts(be, 2, 8)
	job := wfJob
	const roots, width = 10, 4
	rootOf := map[int64]int64{}
	for range roots {
		tasks := []backend.WorkflowTaskParams{{Name: "root", Job: job()}}
		for i := range width {
			tasks = append(tasks, backend.WorkflowTaskParams{Name: "t" + string(rune('a'+i)), Job: job(), Deps: []backend.WorkflowDep{{Task: 0}}})
		}
		w, err := be.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "fan", Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range w.IDs[1:] {
			rootOf[id] = w.IDs[0]
		}
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "wf", Max: 100, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != roots {
		t.Fatalf("claim: %d jobs, %v; want the %d roots", len(rows), err, roots)
	}
	fs := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		fs[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish the roots: %+v, %v", res, err)
	}
	xmins := map[int64]string{}
	q, err := be.Pool().Query(ctx, `SELECT id, state::text, xmin::text FROM `+be.Schema()+`.spool_jobs`)
	if err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for q.Next() {
		var (
			id          int64
			state, xmin string
		)
		if err := q.Scan(&id, &state, &xmin); err != nil {
			t.Fatal(err)
		}
		xmins[id], states[id] = xmin, state
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for id, root := range rootOf {
		if states[id] != "available" || states[root] != "completed" {
			t.Fatalf("task %d %s, its root %d %s; want available and completed", id, states[id], root, states[root])
		}
		if xmins[id] != xmins[root] {
			t.Errorf("task %d released by transaction %s, its root %d completed by %s", id, xmins[id], root, xmins[root])
		}
		parts[xmins[root]] = true
	}
	if len(parts) != roots/2 {
		t.Errorf("the roots' batch was written in %d transactions, want %d (two roots' eight tasks each)", len(parts), roots/2)
	}
}
