package mysql_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestBacklogClaimSkipsHeldRows: a backlog's claim, under the queue's claim
// lock, neither waits for nor takes the rows other transactions hold (two
// pending rows locked by a claim or a cancel in flight, a job inserted in a
// transaction still open): it claims the others at once, and returns them
// as stored, running under its lease. Once the other transactions end, the
// next claim takes the rest. A claim by one UPDATE … ORDER BY … LIMIT n
// fails here (it waits for each held row, with the claim lock held), and so
// does a multi-table UPDATE over a SKIP LOCKED derived table whose join the
// optimizer starts from spool_jobs (docs/benchmarks/2026-12-01c.md).
func TestBacklogClaimSkipsHeldRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A claim that waited for a held row would fail with a lock wait
	// timeout after a second, not hang.
	be := newBackend(t, url.Values{"innodb_lock_wait_timeout": {"1"}})
	db, schema := be.DB(), "`"+be.Database()+"`"
	jobs := func(n int) []*backend.JobInsertParams {
		out := make([]*backend.JobInsertParams, n)
		for i := range out {
			out[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3}
		}
		return out
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs(6)})
	if err != nil {
		t.Fatal(err)
	}
	ids := res.IDs

	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "SELECT id FROM "+schema+".spool_jobs FORCE INDEX (PRIMARY) WHERE id IN (?, ?) FOR UPDATE", ids[0], ids[1]); err != nil {
		t.Fatal(err)
	}
	inserter, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inserter.Rollback() }()
	late, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: sqlTx{inserter}, Jobs: jobs(1)})
	if err != nil {
		t.Fatal(err)
	}

	claim := func(id string) []*backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 100, Lease: time.Minute, ClaimID: id})
		if err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		return rows
	}
	got := claim("first")
	if want := ids[2:]; !slices.Equal(rowIDs(got), want) {
		t.Fatalf("claim with rows held elsewhere took %v, want %v", rowIDs(got), want)
	}
	for _, j := range got {
		stored, err := be.JobGet(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != backend.StateRunning || j.LeasedBy != "first" || j.Attempt != 1 || j.Fence != 1 ||
			j.LeasedUntil == nil || j.AttemptedAt == nil || !j.LeasedUntil.Equal(j.AttemptedAt.Add(time.Minute)) {
			t.Fatalf("claimed job %d: state %s, leased by %q, attempt %d, fence %d, lease %v from %v",
				j.ID, j.State, j.LeasedBy, j.Attempt, j.Fence, j.LeasedUntil, j.AttemptedAt)
		}
		if stored.State != j.State || stored.Fence != j.Fence || stored.Attempt != j.Attempt ||
			!stored.LeasedUntil.Equal(*j.LeasedUntil) || stored.LeasedBy != j.LeasedBy {
			t.Fatalf("claimed job %d returned as %+v, stored as %+v", j.ID, j, stored)
		}
	}

	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := inserter.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, want := rowIDs(claim("second")), []int64{ids[0], ids[1], late.IDs[0]}; !slices.Equal(got, want) {
		t.Fatalf("claim after the other transactions ended took %v, want %v", got, want)
	}
}
