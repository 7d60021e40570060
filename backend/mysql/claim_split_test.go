package mysql_test

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// TestClaimInHalves claims 1,200 of 1,600 pending jobs (of three
// priorities) in one call, large enough to run as two halves side by side
// (claimHalves): the call returns exactly the queue's first 1,200 in claim
// order, once each, all running under the call's claim id, which releases
// them all; with the claim lock on, both of the queue's claim locks were
// taken (before the halves, a queue had one). Jobs of another queue are
// never touched.
func TestClaimInHalves(t *testing.T) {
	t.Parallel()
	for _, lock := range []string{mysql.ClaimLockQueue, mysql.ClaimLockOff} {
		t.Run("lock="+lock, func(t *testing.T) {
			t.Parallel()
			be := newBackend(t, url.Values{mysql.ClaimParam: {mysql.StrategyPessimistic}, mysql.ClaimLockParam: {lock}})
			ctx := context.Background()
			var jobs []*backend.JobInsertParams
			for i := range 1600 {
				jobs = append(jobs, &backend.JobInsertParams{Queue: "halves", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 5, Priority: int16(i % 3)})
				if i%10 == 0 {
					jobs = append(jobs, &backend.JobInsertParams{Queue: "other", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 5})
				}
			}
			if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			db, qdb := be.DB(), "`"+be.Database()+"`"
			var want []int64
			rows, err := db.QueryContext(ctx, "SELECT id FROM "+qdb+".spool_jobs WHERE queue = 'halves' ORDER BY priority, run_at, id LIMIT 1200")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				want = append(want, id)
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}

			got, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "halves", Max: 1200, Lease: time.Minute, ClaimID: "split"})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]int64, len(got))
			for i, j := range got {
				ids[i] = j.ID
				if j.State != backend.StateRunning || j.LeasedBy != "split" || j.Attempt != 1 || j.Queue != "halves" {
					t.Fatalf("job %d came back %s, leased by %q, attempt %d, queue %q", j.ID, j.State, j.LeasedBy, j.Attempt, j.Queue)
				}
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("claimed %d jobs, not the queue's first 1,200 in claim order (first %v, want %v)", len(ids), ids[:min(5, len(ids))], want[:5])
			}
			var running, others int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+qdb+".spool_jobs WHERE state = 'running' AND leased_by = 'split'").Scan(&running); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+qdb+".spool_jobs WHERE queue = 'other' AND state <> 'available'").Scan(&others); err != nil {
				t.Fatal(err)
			}
			if running != 1200 || others != 0 {
				t.Fatalf("%d rows running under the claim id (want 1200), %d of the other queue's moved", running, others)
			}
			var locks int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+qdb+".spool_flow_stripes WHERE queue = 'halves' AND stripe IN (-1, -2)").Scan(&locks); err != nil {
				t.Fatal(err)
			}
			if wantLocks := map[string]int{mysql.ClaimLockQueue: 2, mysql.ClaimLockOff: 0}[lock]; locks != wantLocks {
				t.Fatalf("%d claim lock rows of the queue, want %d", locks, wantLocks)
			}
			n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "split"})
			if err != nil || n != 1200 {
				t.Fatalf("released %d (%v), want 1200", n, err)
			}
		})
	}
}
