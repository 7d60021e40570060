package sqlite_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestFinishPlainFences finishes plain completions of two fences, more than
// the largest statement bucket of one and a padded chunk of the other, plus
// stale leases of the same jobs: each live lease is applied once, each stale
// one rejected, whether completed rows are kept or deleted.
func TestFinishPlainFences(t *testing.T) {
	for _, del := range []bool{false, true} {
		be := newBackend(t, nil)
		ctx := context.Background()
		jobs := make([]*backend.JobInsertParams, 1300)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		claim := func(n int) []*backend.JobRow {
			rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: n, Lease: time.Minute, ClaimID: "t"})
			if err != nil || len(rows) != n {
				t.Fatalf("claim: %d rows, %v", len(rows), err)
			}
			return rows
		}
		// 37 jobs go round twice: released unstarted, they are claimed
		// again under fence 2.
		first := claim(37)
		var fs []backend.JobFinish
		for _, r := range first {
			fs = append(fs, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeRelease})
		}
		if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(res.Rejected) > 0 {
			t.Fatalf("release: %+v %v", res, err)
		}
		rows := claim(len(jobs))
		fs = fs[:0]
		fences := map[int32]int{}
		for _, r := range rows {
			fences[r.Fence]++
			fs = append(fs, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete})
		}
		if fences[1] != len(jobs)-37 || fences[2] != 37 {
			t.Fatalf("fences %v", fences)
		}
		var stale []backend.LeaseRef
		for _, r := range first[:5] {
			stale = append(stale, r.Lease())
			fs = append(fs, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete})
		}
		fs = append(fs, fs[0]) // the same lease twice is applied once
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rejected) != len(stale) {
			t.Fatalf("delete %v: rejected %v, want %v", del, res.Rejected, stale)
		}
		for i, l := range stale {
			if res.Rejected[i] != l {
				t.Fatalf("delete %v: rejected %v, want %v", del, res.Rejected, stale)
			}
		}
		for _, r := range rows {
			j, err := be.JobGet(ctx, r.ID)
			switch {
			case del && err == nil:
				t.Fatalf("job %d kept: %+v", r.ID, j)
			case !del && (err != nil || j.State != backend.StateCompleted || j.Fence != r.Fence):
				t.Fatalf("job %d: %+v %v", r.ID, j, err)
			}
		}
	}
}
