package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestRowsInPlace checks schema 16's stored "none": a job's row holds
// sentinel times and a blank lease holder of a fixed width, not NULL,
// before its claim and finish (so that both overwrite values of the same
// length), a claim pads its id to that width, a finish leaves the lease in
// the row, and every reader reports none for the sentinels, for a lease
// left behind and for a NULL written by hand.
func TestRowsInPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	db, schema := be.DB(), "`"+be.Database()+"`"
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "q", Kind: "a", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "b", Args: []byte(`{}`), MaxAttempts: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res.IDs[0], res.IDs[1]
	raw := func(id int64) (leasedUntil, attemptedAt, finalizedAt, leasedBy string) {
		t.Helper()
		var by *string
		if err := db.QueryRowContext(ctx, `SELECT CAST(leased_until AS CHAR), CAST(attempted_at AS CHAR), CAST(finalized_at AS CHAR), leased_by
FROM `+schema+`.spool_jobs WHERE id = ?`, id).Scan(&leasedUntil, &attemptedAt, &finalizedAt, &by); err != nil {
			t.Fatal(err)
		}
		if by != nil {
			leasedBy = *by
		}
		return
	}
	blank := strings.Repeat(" ", 64)
	if lu, at, fin, by := raw(a); lu != "1000-01-01 00:00:00.000000" || at != lu || fin != "9999-12-31 23:59:59.999999" || by != blank {
		t.Fatalf("a new job's stored times: %s, %s, %s, holder %q; want the sentinels and 64 spaces", lu, at, fin, by)
	}
	if j, err := be.JobGet(ctx, a); err != nil || j.LeasedUntil != nil || j.AttemptedAt != nil || j.FinalizedAt != nil {
		t.Fatalf("a new job: %+v, %v; want no lease, attempt or finish time", j, err)
	}

	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 1, Lease: time.Minute, ClaimID: "claim-1"})
	if err != nil || len(claimed) != 1 || claimed[0].ID != a {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	held := "claim-1" + strings.Repeat(" ", 64-len("claim-1"))
	if _, _, _, by := raw(a); by != held {
		t.Fatalf("a running job's stored holder: %q; want %q", by, held)
	}
	if j, err := be.JobGet(ctx, a); err != nil || j.LeasedUntil == nil || j.LeasedBy != "claim-1" || j.AttemptedAt == nil || j.FinalizedAt != nil {
		t.Fatalf("a running job: %+v, %v; want its lease and attempt time", j, err)
	}
	fr, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: claimed[0].Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(fr.Rejected) != 0 {
		t.Fatalf("finish: %+v, %v", fr, err)
	}
	if lu, _, fin, by := raw(a); lu == "1000-01-01 00:00:00.000000" || by != held || fin == "9999-12-31 23:59:59.999999" {
		t.Fatalf("a completed job's row: lease %s by %q, finalized %s; want the lease left and a finish time", lu, by, fin)
	}
	j, err := be.JobGet(ctx, a)
	if err != nil || j.LeasedUntil != nil || j.LeasedBy != "" || j.AttemptedAt == nil || j.FinalizedAt == nil {
		t.Fatalf("a completed job: %+v, %v; want no lease, its attempt and finish times", j, err)
	}
	listed, err := be.JobList(ctx, &backend.JobListParams{Limit: 10})
	if err != nil || len(listed) != 2 {
		t.Fatalf("list: %d, %v", len(listed), err)
	}
	for _, l := range listed {
		if l.LeasedUntil != nil || l.LeasedBy != "" || (l.FinalizedAt != nil) != (l.ID == a) || (l.AttemptedAt != nil) != (l.ID == a) {
			t.Fatalf("listed job %d (%s): lease %v by %q, attempted %v, finalized %v", l.ID, l.State, l.LeasedUntil, l.LeasedBy, l.AttemptedAt, l.FinalizedAt)
		}
	}

	// A claim id longer than the width is stored whole, and released by it.
	long := strings.Repeat("x", 80)
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 1, Lease: time.Minute, ClaimID: long}); err != nil {
		t.Fatal(err)
	}
	if j, err := be.JobGet(ctx, b); err != nil || j.LeasedBy != long {
		t.Fatalf("a job claimed by a long id: %+v, %v", j, err)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: long}); err != nil || n != 1 {
		t.Fatalf("release of a long claim id: %d, %v; want 1", n, err)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "claim-1"}); err != nil || n != 0 {
		t.Fatalf("release of a finished claim: %d, %v; want 0", n, err)
	}

	// NULL, as a hand-written row may hold, reads as none too.
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET leased_until = NULL, attempted_at = NULL, finalized_at = NULL WHERE id = ?`, b); err != nil {
		t.Fatal(err)
	}
	if j, err := be.JobGet(ctx, b); err != nil || j.LeasedUntil != nil || j.AttemptedAt != nil || j.FinalizedAt != nil {
		t.Fatalf("a job with NULL times: %+v, %v; want none", j, err)
	}
	// Only the finished job counts as finished.
	finished, err := be.JobFinishedSince(ctx, &backend.JobFinishedSinceParams{Since: time.Now().Add(-time.Hour)})
	if err != nil || len(finished) != 1 || finished[0].ID != a {
		t.Fatalf("finished since: %+v, %v; want job %d alone", finished, err, a)
	}
	buckets, err := be.JobThroughput(ctx, &backend.JobThroughputParams{Window: time.Hour, Bucket: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var done int64
	for _, bk := range buckets {
		done += bk.Completed + bk.Discarded + bk.Cancelled
	}
	if done != 1 {
		t.Fatalf("throughput: %v; want one finished job", buckets)
	}
}
