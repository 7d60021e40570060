package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestSettleLeavesADependentCancelledMeanwhile settles a root whose two
// dependents have no other parent (so the settle takes no lock on them
// before its update) while another transaction cancels one of them: the
// cancel holds that row when the settle's snapshot is taken and commits
// while the settle waits for it. The cancelled dependent must stay
// cancelled (the settle's second, by-id update skips a row that is no
// longer waiting); the other one is released.
func TestSettleLeavesADependentCancelledMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, rows := range []bool{false, true} {
		be := newBackend(t)
		if rows {
			be = leaseRowsBackend(t)
		}
		job := wfJob
		w, err := be.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "pair", Tasks: []backend.WorkflowTaskParams{
			{Name: "root", Job: job()},
			{Name: "a", Job: job(), Deps: []backend.WorkflowDep{{Task: 0}}},
			{Name: "b", Job: job(), Deps: []backend.WorkflowDep{{Task: 0}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		root, a, b := w.IDs[0], w.IDs[1], w.IDs[2]
		claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "wf", Max: 10, Lease: time.Minute, ClaimID: "c#1"})
		if err != nil || len(claimed) != 1 || claimed[0].ID != root {
			t.Fatalf("claim: %d jobs, %v; want the root", len(claimed), err)
		}
		cancel, err := be.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cancel.Exec(ctx, `UPDATE `+be.Schema()+`.spool_jobs SET state = 'cancelled', finalized_at = now(), wait_kind = NULL WHERE id = $1 AND state = 'waiting'`, a); err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := cancel.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: claimed[0].Lease(), Outcome: backend.OutcomeComplete}}})
			if err == nil && len(res.Rejected) != 0 {
				err = fmt.Errorf("finish the root: rejected %v", res.Rejected)
			}
			done <- err
		}()
		// The settle is under way once a session waits for the cancel's
		// transaction; only then does the cancel commit.
		for waiting := false; !waiting; {
			select {
			case err := <-done:
				t.Fatalf("the root's finish returned before the cancel committed: %v", err)
			default:
			}
			if err := be.Pool().QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, pid).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
		if err := cancel.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int64]string{a: "cancelled", b: "available"} {
			var state string
			if err := be.Pool().QueryRow(ctx, `SELECT state::text FROM `+be.Schema()+`.spool_jobs WHERE id = $1`, id).Scan(&state); err != nil {
				t.Fatal(err)
			}
			if state != want {
				t.Errorf("lease rows %v: dependent %d is %s, want %s", rows, id, state, want)
			}
		}
	}
}
