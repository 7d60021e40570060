package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestSmallClaimMeetsABacklog: a queue whose last claim came back short
// takes its next claim in the small form, in place; when a backlog
// arrived meanwhile (a workflow's fan-out released at once), that claim
// takes 32 jobs in place and the rest of its ask into lease rows, not the
// whole ask in place.
func TestSmallClaimMeetsABacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	claim := func(max int) []*backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: max, Lease: time.Minute, ClaimID: "c#1"})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	insertJobs(t, be, plainJob())
	if rows := claim(100); len(rows) != 1 {
		t.Fatalf("first claim: %d jobs, want 1", len(rows))
	}
	jobs := make([]*backend.JobInsertParams, 200)
	for i := range jobs {
		jobs[i] = plainJob()
	}
	insertJobs(t, be, jobs...)
	rows := claim(100)
	if len(rows) != 100 {
		t.Fatalf("claim after a short one, 200 pending: %d jobs, want 100", len(rows))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].ID <= rows[i-1].ID {
			t.Fatalf("claimed jobs out of claim order: %d after %d", rows[i].ID, rows[i-1].ID)
		}
	}
	// The first claim's job is in a lease row (a queue's first claim is
	// large), with 68 of the second's; 32 of the second's are in place.
	if leased, inPlace := leaseRowsState(t, be); leased != 69 || inPlace != 32 {
		t.Fatalf("%d jobs in lease rows and %d running in place, want 69 and 32", leased, inPlace)
	}
	// Every one of them finishes, wherever it is.
	var fs []backend.JobFinish
	for _, r := range rows {
		fs = append(fs, backend.JobFinish{Lease: backend.LeaseRef{ID: r.ID, Fence: r.Fence}, Outcome: backend.OutcomeComplete})
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish the claim: %+v, %v; want every finish applied", res, err)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 1 || inPlace != 0 {
		t.Fatalf("after the finishes: %d leased, %d running in place, want the first claim's job alone", leased, inPlace)
	}
}

// TestLeasedTasksFinishedInParts: three tasks with a common dependent in
// one lease row, finished in three batches (complete_deps_leased.sql and
// finish_deps_leased.sql take from a row only the batch's jobs under their
// fences): a finish under a stale fence is refused and leaves its task
// running, the others apply, the dependent waits for all three and is
// released by the last, and the lease row goes with its last job.
func TestLeasedTasksFinishedInParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := leaseRowsBackend(t)
	w, err := be.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "fan-in", Tasks: []backend.WorkflowTaskParams{
		{Name: "a", Job: wfJob()},
		{Name: "b", Job: wfJob()},
		{Name: "c", Job: wfJob()},
		{Name: "d", Job: wfJob(), Deps: []backend.WorkflowDep{{Task: 0}, {Task: 1}, {Task: 2, OnFail: backend.DepFailDone}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "wf", Max: 10, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %d jobs, %v; want a, b and c", len(rows), err)
	}
	var leaseRows int
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_leases WHERE deps`).Scan(&leaseRows); err != nil || leaseRows != 1 {
		t.Fatalf("%d lease rows flagged deps, %v; want the three tasks in one", leaseRows, err)
	}
	byID := map[int64]*backend.JobRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	a, b, c := byID[w.IDs[0]], byID[w.IDs[1]], byID[w.IDs[2]]
	finish := func(fs ...backend.JobFinish) []backend.LeaseRef {
		t.Helper()
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
		if err != nil {
			t.Fatal(err)
		}
		return res.Rejected
	}
	states := func() map[int64]backend.State {
		t.Helper()
		d, err := be.WorkflowGet(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]backend.State{}
		for _, j := range d.Jobs {
			m[j.ID] = j.State
		}
		return m
	}
	done := func(j *backend.JobRow) backend.JobFinish {
		return backend.JobFinish{Lease: backend.LeaseRef{ID: j.ID, Fence: j.Fence}, Outcome: backend.OutcomeComplete}
	}
	stale := backend.JobFinish{Lease: backend.LeaseRef{ID: b.ID, Fence: b.Fence - 1}, Outcome: backend.OutcomeComplete}

	// a and a stale b: a applies, b's is refused and b runs on.
	if rejected := finish(done(a), stale); len(rejected) != 1 || rejected[0] != stale.Lease {
		t.Fatalf("finish of a and of b under a stale fence: rejected %+v, want b's alone", rejected)
	}
	if s := states(); s[a.ID] != backend.StateCompleted || s[b.ID] != backend.StateRunning || s[c.ID] != backend.StateRunning || s[w.IDs[3]] != backend.StateWaiting {
		t.Fatalf("after a: a %s, b %s, c %s, d %s; want completed, running, running, waiting", s[a.ID], s[b.ID], s[c.ID], s[w.IDs[3]])
	}
	// c discarded (finish_deps_leased.sql): its edge counts it as done.
	discard := backend.JobFinish{Lease: backend.LeaseRef{ID: c.ID, Fence: c.Fence}, Outcome: backend.OutcomeDiscard}
	if rejected := finish(discard); len(rejected) != 0 {
		t.Fatalf("discard of c refused: %+v", rejected)
	}
	if s := states(); s[c.ID] != backend.StateDiscarded || s[b.ID] != backend.StateRunning || s[w.IDs[3]] != backend.StateWaiting {
		t.Fatalf("after c: b %s, c %s, d %s; want running, discarded, waiting", s[b.ID], s[c.ID], s[w.IDs[3]])
	}
	// b, the row's last job: d is released and the row goes.
	if rejected := finish(done(b)); len(rejected) != 0 {
		t.Fatalf("finish of b refused: %+v", rejected)
	}
	if s := states(); s[b.ID] != backend.StateCompleted || s[w.IDs[3]] != backend.StateAvailable {
		t.Fatalf("after b: b %s, d %s; want completed, available", s[b.ID], s[w.IDs[3]])
	}
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_leases`).Scan(&leaseRows); err != nil || leaseRows != 0 {
		t.Fatalf("%d lease rows left, %v; want none", leaseRows, err)
	}
}
