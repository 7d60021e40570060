package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// A striped quick claim takes at most its stripe's share of a limit's
// lower half, and nothing once the running jobs leave no room for every
// stripe's share; a claim holding the whole lock then takes up to the
// limit.
func TestStripedQuickClaim(t *testing.T) {
	b, _ := scratchBackend(t)
	ctx := context.Background()
	jobs := make([]*backend.JobInsertParams, 40)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3}
	}
	if _, err := b.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	claim := func(q backend.FlowQuick) *backend.FlowQuickResult {
		t.Helper()
		var got *backend.FlowQuickResult
		err := b.JobClaimFlow(ctx, &backend.JobClaimFlowParams{Queue: "q", Lease: time.Minute, ClaimID: "test", Quick: &q},
			func(tx backend.FlowTx) error {
				run, err := tx.FlowRunning(ctx)
				got = run.Quick
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Limit 16, 4 stripes: a share of 16/8 = 2, while at most 16 - 4*2 = 8
	// run.
	for i, want := range []int{2, 2, 2, 2, 2, 0} {
		got := claim(backend.FlowQuick{Want: 5, Extra: 5, Limit: 16, Stripes: 4})
		if !got.Striped || len(got.Jobs) != want {
			t.Fatalf("striped claim %d took %d jobs (striped %v), want %d", i+1, len(got.Jobs), got.Striped, want)
		}
	}
	// 10 running: no room for every stripe's share. The whole lock lets the
	// workers' 5 run and no prefetch (the lower half, 8, is full).
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, Limit: 16}); got.Striped || len(got.Jobs) != 5 {
		t.Fatalf("whole-lock claim took %d jobs (striped %v), want 5", len(got.Jobs), got.Striped)
	}
	// A per-key limit counts the busiest key (here the jobs without one,
	// 15 running): 24/8 = 3 a stripe, room needed 12, there is 9.
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, KeyLimit: 24, Stripes: 4}); len(got.Jobs) != 0 {
		t.Fatalf("striped claim under a key limit took %d jobs with 15 running of 24", len(got.Jobs))
	}
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, KeyLimit: 40, Stripes: 4}); len(got.Jobs) != 5 {
		t.Fatalf("striped claim under a key limit of 40 took %d jobs with 15 running, want its share 5", len(got.Jobs))
	}
}
