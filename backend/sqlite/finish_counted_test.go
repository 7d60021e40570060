package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestFinishCountedFallsBack: plain completions whose leases all hold are
// applied by the statements that count the rows they change; a chunk with
// a stale lease is rolled back and applied again by the statements that
// return the applied ids, which the next countedRest calls use, and the
// call after them counts again. Every call reports exactly the stale
// lease as rejected, whether completed rows are kept or deleted.
func TestFinishCountedFallsBack(t *testing.T) {
	for _, del := range []bool{false, true} {
		ctx := context.Background()
		be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "f.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		if err := be.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		const per = 20
		calls := countedRest + 3
		ins := make([]*backend.JobInsertParams, per*calls)
		for i := range ins {
			ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
			t.Fatal(err)
		}
		// A stale lease: the job released and claimed again under a new
		// fence, its first lease then finished beside the second.
		first, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 1, Lease: time.Minute, ClaimID: "a"})
		if err != nil || len(first) != 1 {
			t.Fatalf("claim: %v %v", first, err)
		}
		if _, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: first[0].Lease(), Outcome: backend.OutcomeRelease}}}); err != nil {
			t.Fatal(err)
		}
		stale := first[0].Lease()
		for call := range calls {
			rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: per, Lease: time.Minute, ClaimID: "b"})
			if err != nil || len(rows) != per {
				t.Fatalf("call %d: claimed %d, %v", call, len(rows), err)
			}
			fs := make([]backend.JobFinish, 0, per+1)
			for _, r := range rows {
				fs = append(fs, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete})
			}
			want := 0
			if call == 1 {
				fs = append(fs, backend.JobFinish{Lease: stale, Outcome: backend.OutcomeComplete})
				want = 1
			}
			before := be.st.returnIDs.Load()
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rejected) != want || want == 1 && res.Rejected[0] != stale {
				t.Fatalf("delete %v, call %d: rejected %v, want %d (%v)", del, call, res.Rejected, want, stale)
			}
			after := be.st.returnIDs.Load()
			switch {
			case call == 0 && (before != 0 || after != 0):
				t.Fatalf("call 0: returnIDs %d → %d, want 0 → 0", before, after)
			case call == 1 && after != countedRest:
				t.Fatalf("call 1 (a stale lease): returnIDs %d, want %d", after, countedRest)
			case call > 1 && after != max(0, before-1):
				t.Fatalf("call %d: returnIDs %d → %d, want one fewer", call, before, after)
			}
			for _, r := range rows {
				j, err := be.JobGet(ctx, r.ID)
				switch {
				case del && err == nil:
					t.Fatalf("job %d kept: %+v", r.ID, j)
				case !del && (err != nil || j.State != backend.StateCompleted):
					t.Fatalf("job %d: %+v %v", r.ID, j, err)
				}
			}
		}
		if n := be.st.returnIDs.Load(); n != 0 {
			t.Fatalf("returnIDs %d after %d calls, want 0", n, calls)
		}
	}
}
