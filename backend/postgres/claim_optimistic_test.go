package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// TestOptimisticClaimSkipsLockedRows holds a row lock on one pending job,
// as a concurrent claim, finish or heartbeat does, and claims with the
// optimistic strategy. The claim must take the other jobs at once and leave
// the locked one: a claim that waits for row locks while holding its own
// joins lock cycles with other clients' claims, finishes and heartbeats,
// each broken only by the server's deadlock check a second later, and
// heartbeats stalled that way let running jobs' leases end.
func TestOptimisticClaimSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newBackend(t)
	be, err := postgres.New(base.Pool(), &postgres.Options{Schema: base.Schema(), ClaimStrategy: postgres.StrategyOptimistic})
	if err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, be, plainJob(), plainJob(), plainJob())

	tx, err := be.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+be.Schema()+`.spool_jobs WHERE id = $1 FOR UPDATE`, ids[1]); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	began := time.Now()
	rows, err := be.JobClaim(cctx, &backend.JobClaimParams{Queue: "lr", Max: 3, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil {
		t.Fatalf("claim beside a locked row: %v after %v", err, time.Since(began).Round(time.Millisecond))
	}
	var got []int64
	for _, r := range rows {
		got = append(got, r.ID)
	}
	slices.Sort(got)
	if want := []int64{ids[0], ids[2]}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v beside the locked job %d, want %v", got, ids[1], want)
	}

	// Once the lock is gone, the job is claimed as usual.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 3, Lease: time.Minute, ClaimID: "c#2"})
	if err != nil || len(rows) != 1 || rows[0].ID != ids[1] {
		t.Fatalf("claim after the lock: %d rows, %v; want job %d", len(rows), err, ids[1])
	}
}
