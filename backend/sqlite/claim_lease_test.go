package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestClaimLeaseNamesRowsByID: the claim's lease (claim_lease.sql) finds
// the rows claim.sql read by their ids, a rowid lookup each, instead of
// running the pick again (a walk of the pending index and a temporary
// table of its ids, for every claim).
func TestClaimLeaseNamesRowsByID(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "p.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q := strings.Replace(stmt.claimLease, "{{ids}}", "?4, ?", 1)
	plan := explainPlan(t, be, q, int64(1), int64(2), "c", int64(3), int64(4))
	if !strings.Contains(plan, "SEARCH spool_jobs USING INTEGER PRIMARY KEY (rowid=?)") ||
		strings.Contains(plan, "spool_jobs_pending") || strings.Contains(plan, "SUBQUERY") {
		t.Fatalf("the lease's plan:\n%swant a rowid search and nothing else", plan)
	}
}

// TestClaimLeasesWhatItRead: claims larger than a lease statement's
// largest bucket, and one ending in a padded chunk, lease exactly the rows
// they return (running, attempt and fence one more, held by the claim),
// and leave the rest pending.
func TestClaimLeasesWhatItRead(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "l.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	top := leaseBuckets[len(leaseBuckets)-1]
	total := 2*top + 300
	ins := make([]*backend.JobInsertParams, total)
	for i := range ins {
		ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	left := total
	for i, max := range []int{top + 5, top - 3, 7} {
		claimID := "claim-" + string(rune('a'+i))
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: max, Lease: time.Minute, ClaimID: claimID})
		if err != nil || len(rows) != max {
			t.Fatalf("claim %s of %d: %d rows, %v", claimID, max, len(rows), err)
		}
		var got []int64
		for _, r := range rows {
			if r.State != backend.StateRunning || r.Attempt != 1 || r.Fence != 1 || r.LeasedBy != claimID {
				t.Fatalf("claim %s returned job %d %s, attempt %d, fence %d, held by %q", claimID, r.ID, r.State, r.Attempt, r.Fence, r.LeasedBy)
			}
			got = append(got, r.ID)
		}
		slices.Sort(got)
		stored := storedIDs(t, be, `SELECT id FROM spool_jobs WHERE state = 'running' AND attempt = 1 AND fence = 1
  AND leased_by = ? AND leased_until IS NOT NULL ORDER BY id`, claimID)
		if !slices.Equal(stored, got) {
			t.Fatalf("claim %s returned %d jobs, the store holds %d leased by it", claimID, len(got), len(stored))
		}
		left -= max
		if pending := storedIDs(t, be, `SELECT id FROM spool_jobs WHERE state = 'available' AND fence = 0 AND leased_by IS NULL`); len(pending) != left {
			t.Fatalf("after claim %s: %d jobs pending, want %d", claimID, len(pending), left)
		}
	}
}

// storedIDs returns the ids q selects.
func storedIDs(t *testing.T, be *Backend, q string, args ...any) []int64 {
	t.Helper()
	rows, err := be.st.readers.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
