package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// leaseRowsState counts what the schema holds: jobs in lease rows not yet
// done, and running jobs in spool_jobs.
func leaseRowsState(t *testing.T, be *postgres.Backend) (leased, inPlace int) {
	t.Helper()
	s := be.Schema()
	err := be.Pool().QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM `+s+`.spool_leased_jobs),
  (SELECT count(*) FROM `+s+`.spool_jobs WHERE state = 'running')`).Scan(&leased, &inPlace)
	if err != nil {
		t.Fatal(err)
	}
	return leased, inPlace
}

func insertJobs(t *testing.T, be backend.Backend, jobs ...*backend.JobInsertParams) []int64 {
	t.Helper()
	res, err := be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

func plainJob() *backend.JobInsertParams {
	return &backend.JobInsertParams{Queue: "lr", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
}

// claimThreeLeasedOneInPlace inserts three plain jobs and a unique one in
// the queue "lr" and claims them: the plain ones into lease rows, the
// unique one in place.
func claimThreeLeasedOneInPlace(t *testing.T, be *postgres.Backend) ([]int64, []*backend.JobRow) {
	t.Helper()
	unique := plainJob()
	unique.UniqueKey, unique.UniqueStates = "k1", backend.UniqueStatesRequired
	ids := insertJobs(t, be, plainJob(), plainJob(), plainJob(), unique)
	rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "lr", Max: 10, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != 4 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 3 || inPlace != 1 {
		t.Fatalf("after the claim: %d jobs in lease rows and %d running in place, want 3 and 1", leased, inPlace)
	}
	return ids, rows
}

// TestLeaseRows follows jobs through lease rows: a claim moves plain jobs
// there and keeps a unique job in place; reads see them running; a record
// moves one back in place; one heartbeat and one finish cover both kinds;
// a second finish is rejected; nothing is left in lease rows.
func TestLeaseRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	ids, rows := claimThreeLeasedOneInPlace(t, be)
	for _, r := range rows {
		got, err := be.JobGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != backend.StateRunning || got.Fence != r.Fence || got.Attempt != 1 || got.LeasedBy != "c#1" ||
			got.LeasedUntil == nil || !got.LeasedUntil.Equal(*r.LeasedUntil) {
			t.Fatalf("job %d read back as %+v, claimed as %+v", r.ID, got, r)
		}
	}
	listed, err := be.JobList(ctx, &backend.JobListParams{Queue: "lr", States: []backend.State{backend.StateRunning}})
	if err != nil || len(listed) != 4 {
		t.Fatalf("list running: %d jobs, %v", len(listed), err)
	}
	stats, err := be.QueueStatsAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stats {
		if q.Queue == "lr" && q.Counts[backend.StateRunning] != 4 {
			t.Fatalf("queue stats: %+v, want 4 running", q)
		}
	}

	// Recording output moves the job back into spool_jobs, still running
	// under the same lease.
	ok, err := be.JobRecord(ctx, &backend.JobRecordParams{Lease: rows[0].Lease(), Output: json.RawMessage(`{"r":1}`)})
	if err != nil || !ok {
		t.Fatalf("record: %v, %v", ok, err)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 2 || inPlace != 2 {
		t.Fatalf("after the record: %d jobs in lease rows and %d in place, want 2 and 2", leased, inPlace)
	}

	leases := make([]backend.LeaseRef, len(rows))
	finishes := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		leases[i] = r.Lease()
		finishes[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
	}
	hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: time.Hour})
	if err != nil || len(hb.Lost) != 0 {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	for _, r := range rows {
		got, err := be.JobGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LeasedUntil.Sub(*r.LeasedUntil) < 30*time.Minute {
			t.Fatalf("job %d: lease ends %v after the heartbeat, claimed until %v", r.ID, got.LeasedUntil, r.LeasedUntil)
		}
	}
	// A retry for one job, completions for the rest: one batch over both
	// kinds of running job.
	finishes[1].Outcome, finishes[1].Delay = backend.OutcomeRetry, time.Hour
	finishes[1].Error = &backend.AttemptError{Attempt: 1, Error: "boom"}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %+v, %v", res, err)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 0 || inPlace != 0 {
		t.Fatalf("after the finish: %d jobs in lease rows and %d in place, want none", leased, inPlace)
	}
	var rowsLeft int
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_leases`).Scan(&rowsLeft); err != nil || rowsLeft != 0 {
		t.Fatalf("lease rows left: %d, %v", rowsLeft, err)
	}
	for i, id := range ids {
		got, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := backend.StateCompleted
		if id == rows[1].ID {
			want = backend.StateRetryable
			if len(got.Errors) != 1 || got.Errors[0].Error != "boom" || got.Attempt != 1 {
				t.Fatalf("retried job %d: %+v", id, got)
			}
		}
		if got.State != want || got.Attempt != 1 {
			t.Fatalf("job %d (%d): state %s attempt %d, want %s attempt 1", id, i, got.State, got.Attempt, want)
		}
		if id == rows[0].ID && string(got.Output) != `{"r": 1}` {
			t.Fatalf("job %d: output %s, want the recorded {\"r\": 1}", id, got.Output)
		}
	}
	again, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
	if err != nil || len(again.Rejected) != len(finishes) {
		t.Fatalf("second finish: %+v, %v; want every outcome rejected", again, err)
	}
}

// TestLeaseRowsRescue lets a lease row's lease end: rescue puts its jobs
// back with the attempt counted, the next claim gives new fences, and the
// first claim's late outcome is rejected while the second's applies.
func TestLeaseRowsRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	insertJobs(t, be, plainJob(), plainJob())
	first, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 2, Lease: time.Microsecond, ClaimID: "dead#1"})
	if err != nil || len(first) != 2 {
		t.Fatalf("claim: %d rows, %v", len(first), err)
	}
	// The lease ended a microsecond after the claim, by the database's
	// clock; rescue compares with that clock.
	res, err := be.JobRescue(ctx, &backend.JobRescueParams{})
	if err != nil || res.Retried != 2 {
		t.Fatalf("rescue: %+v, %v; want 2 retried", res, err)
	}
	second, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 2, Lease: time.Minute, ClaimID: "live#1"})
	if err != nil || len(second) != 2 {
		t.Fatalf("claim again: %d rows, %v", len(second), err)
	}
	late := []backend.JobFinish{{Lease: first[0].Lease(), Outcome: backend.OutcomeComplete}, {Lease: first[1].Lease(), Outcome: backend.OutcomeComplete}}
	got, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: late})
	if err != nil || len(got.Rejected) != 2 {
		t.Fatalf("the dead claim's outcomes: %+v, %v; want both rejected", got, err)
	}
	for _, r := range second {
		if r.Attempt != 2 || r.Fence <= first[0].Fence {
			t.Fatalf("reclaimed job %d: attempt %d fence %d (first fence %d)", r.ID, r.Attempt, r.Fence, first[0].Fence)
		}
	}
	live := []backend.JobFinish{{Lease: second[0].Lease(), Outcome: backend.OutcomeComplete}, {Lease: second[1].Lease(), Outcome: backend.OutcomeComplete}}
	if got, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: live}); err != nil || len(got.Rejected) != 0 {
		t.Fatalf("the live claim's outcomes: %+v, %v", got, err)
	}
}

// TestClaimsInPlace checks that spool_claims=in_place keeps claimed jobs
// in spool_jobs, and that their outcomes are written there. (The in-place
// claim statement is also every quick flow claim's, which the conformance
// suite runs.)
func TestClaimsInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newBackend(t)
	be, err := postgres.New(base.Pool(), &postgres.Options{Schema: base.Schema(), Claims: postgres.ClaimsInPlace})
	if err != nil {
		t.Fatal(err)
	}
	insertJobs(t, be, plainJob(), plainJob())
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 2, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if leased, inPlace := leaseRowsState(t, base); leased != 0 || inPlace != 2 {
		t.Fatalf("%d jobs in lease rows and %d in place, want 0 and 2", leased, inPlace)
	}
	fs := []backend.JobFinish{{Lease: rows[0].Lease(), Outcome: backend.OutcomeComplete}, {Lease: rows[1].Lease(), Outcome: backend.OutcomeRetry}}
	if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %+v, %v", res, err)
	}
	if leased, inPlace := leaseRowsState(t, base); leased != 0 || inPlace != 0 {
		t.Fatalf("after the finish: %d jobs in lease rows and %d in place, want none", leased, inPlace)
	}
	if _, err := postgres.New(base.Pool(), &postgres.Options{Schema: base.Schema(), Claims: "rows"}); err == nil {
		t.Fatal("claims \"rows\" was accepted")
	}
}

// TestLeaseRowsConcurrentOps races finishes, records and cancels over the
// jobs of several lease rows, which move jobs back in place while finishes
// read the rows: every call succeeds or is refused as it should, and each
// job ends exactly once, completed by its finish or cancelled by its
// cancel, never both and never neither.
func TestLeaseRowsConcurrentOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	const n = 400
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = plainJob()
	}
	insertJobs(t, be, jobs...)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: n, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	completed := make([]bool, n)
	cancelled := make([]bool, n)
	errs := make(chan error, 3)
	go func() { // finishes in batches of 7
		for i := 0; i < n; i += 7 {
			var fs []backend.JobFinish
			for k := i; k < min(i+7, n); k++ {
				fs = append(fs, backend.JobFinish{Lease: rows[k].Lease(), Outcome: backend.OutcomeComplete})
			}
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
			if err != nil {
				errs <- err
				return
			}
			rejected := map[int64]bool{}
			for _, f := range res.Rejected {
				rejected[f.ID] = true
			}
			for k := i; k < min(i+7, n); k++ {
				completed[k] = !rejected[rows[k].ID]
			}
		}
		errs <- nil
	}()
	go func() { // records on every third job, backwards
		for k := n - 1; k >= 0; k -= 3 {
			if _, err := be.JobRecord(ctx, &backend.JobRecordParams{Lease: rows[k].Lease(), Metadata: json.RawMessage(`{"m":1}`)}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() { // cancels every fifth job, from the middle out
		for d := 0; d < n; d += 5 {
			k := (n/2 + d) % n
			_, err := be.JobCancel(ctx, &backend.JobCancelParams{ID: rows[k].ID})
			switch {
			case err == nil:
				cancelled[k] = true
			case errors.Is(err, backend.ErrInvalidState): // completed first
			default:
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for k, r := range rows {
		got, err := be.JobGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case completed[k] == cancelled[k]:
			t.Fatalf("job %d: completed %v and cancelled %v", r.ID, completed[k], cancelled[k])
		case completed[k] && got.State != backend.StateCompleted, cancelled[k] && got.State != backend.StateCancelled:
			t.Fatalf("job %d: state %s, completed %v, cancelled %v", r.ID, got.State, completed[k], cancelled[k])
		}
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 0 || inPlace != 0 {
		t.Fatalf("%d jobs left in lease rows and %d running in place", leased, inPlace)
	}
}

// TestLeaseRowsFoundBySpan claims two lease rows whose spans overlap
// (odd ids, of the higher priority, in one claim, then the even ones in
// another) and holds a lock on the one
// of odd ids: heartbeats, finishes, reads and a record of even jobs find
// theirs without waiting on it, so a row whose span only overlaps a
// batch's is neither locked nor read (the check of the ids in sql/fragments/locate.sql).
func TestLeaseRowsFoundBySpan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	jobs := make([]*backend.JobInsertParams, 128)
	for i := range jobs {
		jobs[i] = plainJob()
		jobs[i].Priority = int16(1 + i%2)
	}
	insertJobs(t, be, jobs...)
	var rows []*backend.JobRow
	for range 2 {
		claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 64, Lease: time.Minute, ClaimID: "c#1"})
		if err != nil || len(claimed) != 64 {
			t.Fatalf("claim: %d rows, %v", len(claimed), err)
		}
		rows = append(rows, claimed...)
	}
	s := be.Schema()
	var overlap bool
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) = 2 AND bool_and(span && (SELECT span FROM `+s+`.spool_leases l2 WHERE l2.id <> l.id))
  FROM `+s+`.spool_leases l`).Scan(&overlap); err != nil || !overlap {
		t.Fatalf("want two lease rows whose spans overlap: %v, %v", overlap, err)
	}
	holder, err := be.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM `+s+`.spool_leases WHERE ids[1] = $1 FOR UPDATE`, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	var even []*backend.JobRow
	for _, r := range rows {
		if r.Priority == 2 {
			even = append(even, r)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leases := []backend.LeaseRef{even[0].Lease(), even[1].Lease()}
	if hb, err := be.JobHeartbeatMany(wctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: time.Hour}); err != nil || len(hb.Lost) != 0 {
		t.Fatalf("heartbeat beside the locked row: %+v, %v", hb, err)
	}
	if got, err := be.JobGet(wctx, even[2].ID); err != nil || got.State != backend.StateRunning || got.Fence != even[2].Fence {
		t.Fatalf("read beside the locked row: %+v, %v", got, err)
	}
	if ok, err := be.JobRecord(wctx, &backend.JobRecordParams{Lease: even[3].Lease(), Output: json.RawMessage(`{}`)}); err != nil || !ok {
		t.Fatalf("record beside the locked row: %v, %v", ok, err)
	}
	for _, del := range []bool{false, true} {
		fs := []backend.JobFinish{{Lease: even[4].Lease(), Outcome: backend.OutcomeComplete}, {Lease: even[5].Lease(), Outcome: backend.OutcomeComplete}}
		if del {
			fs = []backend.JobFinish{{Lease: even[6].Lease(), Outcome: backend.OutcomeComplete}, {Lease: even[7].Lease(), Outcome: backend.OutcomeComplete}}
		}
		res, err := be.JobFinishMany(wctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
		if err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish beside the locked row (delete %v): %+v, %v", del, res, err)
		}
	}
}

// TestSmallClaims follows the default's choice of where claimed jobs are
// held: a queue's first claim goes into lease rows; after a claim that came
// back short of its ask with fewer than 32 jobs the next stays in place
// (32 of it at most, the rest in lease rows), after a claim of 32 or more
// the next goes into lease rows again, and a
// claim that got all of an ask below 32 leaves the choice as it was.
// Heartbeats and finishes over jobs held both ways apply to every one of
// them.
func TestSmallClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	claim := func(max, want int, wantLeased, wantInPlace int) []*backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: max, Lease: time.Minute, ClaimID: "c#1"})
		if err != nil || len(rows) != want {
			t.Fatalf("claim of %d: %d rows, %v; want %d", max, len(rows), err, want)
		}
		if leased, inPlace := leaseRowsState(t, be); leased != wantLeased || inPlace != wantInPlace {
			t.Fatalf("after a claim of %d of %d asked: %d jobs in lease rows and %d in place, want %d and %d", want, max, leased, inPlace, wantLeased, wantInPlace)
		}
		return rows
	}
	insert := func(n int) {
		t.Helper()
		jobs := make([]*backend.JobInsertParams, n)
		for i := range jobs {
			jobs[i] = plainJob()
		}
		insertJobs(t, be, jobs...)
	}
	insert(80)

	var rows []*backend.JobRow
	rows = append(rows, claim(2, 2, 2, 0)...)    // first claim: lease rows
	rows = append(rows, claim(40, 40, 42, 0)...) // after all of an ask of 2: lease rows still
	rows = append(rows, claim(60, 38, 80, 0)...) // after 40: lease rows
	insert(10)
	rows = append(rows, claim(20, 10, 90, 0)...) // after 38 of 60: lease rows
	insert(45)
	rows = append(rows, claim(40, 40, 98, 32)...) // after 10 of 20: 32 in place, the rest in lease rows
	rows = append(rows, claim(3, 3, 101, 32)...)  // after 40: lease rows
	rows = append(rows, claim(4, 2, 103, 32)...)  // after all of an ask of 3: lease rows still
	insert(6)
	rows = append(rows, claim(3, 3, 103, 35)...) // after 2 of 4: in place
	rows = append(rows, claim(3, 3, 103, 38)...) // after all of an ask of 3: in place still

	leases := make([]backend.LeaseRef, len(rows))
	finishes := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		leases[i] = r.Lease()
		finishes[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
	}
	hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: time.Hour})
	if err != nil || len(hb.Lost) != 0 {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	// One retry among successes takes the general finish; the rest of the
	// successes the completion statements.
	finishes[3].Outcome, finishes[3].Delay = backend.OutcomeRetry, time.Hour
	half := len(finishes) / 2
	for _, batch := range [][]backend.JobFinish{finishes[:half], finishes[half:]} {
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: batch})
		if err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish: %+v, %v", res, err)
		}
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 0 || inPlace != 0 {
		t.Fatalf("after the finishes: %d jobs in lease rows and %d running in place, want none", leased, inPlace)
	}
	again, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
	if err != nil || len(again.Rejected) != len(finishes) {
		t.Fatalf("second finish: %+v, %v; want every outcome rejected", again, err)
	}
	var completed, retryable int
	err = be.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'retryable')
  FROM `+be.Schema()+`.spool_jobs`).Scan(&completed, &retryable)
	if err != nil || completed != len(rows)-1 || retryable != 1 {
		t.Fatalf("%d completed and %d retryable (%v), want %d and 1", completed, retryable, err, len(rows)-1)
	}
}

// TestLeasedCompletions completes jobs held in lease rows
// (complete_leased_keep.sql, complete_leased_delete.sql): a batch of 30
// on the small statements' plans, with stale fences and a job moved back
// into spool_jobs among them, then the remaining 70 on the wide ones.
// Outcomes under a stale fence are rejected and leave their job running;
// the others leave a completed row as the job ran, or nothing; lease rows
// go with their last job.
func TestLeasedCompletions(t *testing.T) {
	t.Parallel()
	for _, del := range []bool{false, true} {
		t.Run(map[bool]string{false: "kept", true: "deleted"}[del], func(t *testing.T) {
			t.Parallel()
			testLeasedCompletions(t, del)
		})
	}
}

func testLeasedCompletions(t *testing.T, del bool) {
	ctx := context.Background()
	be := newBackend(t)
	jobs := make([]*backend.JobInsertParams, 100)
	for i := range jobs {
		jobs[i] = plainJob()
		jobs[i].Args = json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))
	}
	insertJobs(t, be, jobs...)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 100, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != 100 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	leaseRows := func() (n int) {
		t.Helper()
		if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_leases`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := leaseRows(); n != 2 {
		t.Fatalf("%d lease rows after a claim of 100, want 2", n)
	}
	// Recording output moves rows[3] back into spool_jobs.
	if ok, err := be.JobRecord(ctx, &backend.JobRecordParams{Lease: rows[3].Lease(), Output: json.RawMessage(`{"r": 3}`)}); err != nil || !ok {
		t.Fatalf("record: %v, %v", ok, err)
	}
	complete := func(rs []*backend.JobRow, stale map[int64]bool) *backend.JobFinishManyResult {
		t.Helper()
		fs := make([]backend.JobFinish, len(rs))
		for i, r := range rs {
			l := r.Lease()
			if stale[r.ID] {
				l.Fence++
			}
			fs[i] = backend.JobFinish{Lease: l, Outcome: backend.OutcomeComplete}
		}
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	stale := map[int64]bool{rows[0].ID: true, rows[10].ID: true, rows[29].ID: true}
	res := complete(rows[:30], stale)
	if len(res.Rejected) != len(stale) {
		t.Fatalf("first batch: %d rejected, want the %d with stale fences", len(res.Rejected), len(stale))
	}
	for _, l := range res.Rejected {
		if !stale[l.ID] {
			t.Fatalf("first batch: job %d rejected under its own fence", l.ID)
		}
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 73 || inPlace != 0 {
		t.Fatalf("after the first batch: %d jobs in lease rows and %d running in place, want 73 and 0", leased, inPlace)
	}
	if n := leaseRows(); n != 2 {
		t.Fatalf("%d lease rows after the first batch, want both, their jobs marked done", n)
	}
	var left []*backend.JobRow
	for _, r := range rows {
		if stale[r.ID] {
			left = append(left, r)
		}
	}
	if res := complete(append(left, rows[30:]...), nil); len(res.Rejected) != 0 {
		t.Fatalf("second batch: %d rejected, want none", len(res.Rejected))
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 0 || inPlace != 0 {
		t.Fatalf("after the second batch: %d jobs in lease rows and %d running in place, want none", leased, inPlace)
	}
	if n := leaseRows(); n != 0 {
		t.Fatalf("%d lease rows left, want none", n)
	}
	var kept int
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_jobs`).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if del && kept != 0 {
		t.Fatalf("%d job rows left, want every completed job deleted", kept)
	}
	if !del {
		if kept != len(rows) {
			t.Fatalf("%d job rows, want the %d completed", kept, len(rows))
		}
		for _, r := range rows {
			got, err := be.JobGet(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != backend.StateCompleted || got.Fence != r.Fence || got.Attempt != 1 || string(got.Args) != string(r.Args) ||
				got.FinalizedAt == nil || got.AttemptedAt == nil || !got.AttemptedAt.Equal(*r.AttemptedAt) || got.LeasedUntil != nil {
				t.Fatalf("job %d completed as %+v, claimed as %+v", r.ID, got, r)
			}
			if r.ID == rows[3].ID && string(got.Output) != `{"r": 3}` {
				t.Fatalf("job %d: output %s, want the recorded one", r.ID, got.Output)
			}
		}
	}
	if res := complete(rows, nil); len(res.Rejected) != len(rows) {
		t.Fatalf("completing again: %d rejected, want all %d", len(res.Rejected), len(rows))
	}
}

// TestStepRecordManyLeaseRows records one batch of steps for jobs in lease
// rows and in place, with a stale lease among them: the leased jobs stay
// in their lease rows, each record as it would be alone.
func TestStepRecordManyLeaseRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	_, rows := claimThreeLeasedOneInPlace(t, be)
	step := func(l backend.LeaseRef, name string) backend.StepRecordParams {
		return backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(fmt.Sprintf("%q", name))}
	}
	stale := rows[1].Lease()
	stale.Fence--
	batch := []backend.StepRecordParams{
		step(rows[3].Lease(), "a"), step(rows[0].Lease(), "a"), step(stale, "x"),
		step(rows[0].Lease(), "b"), step(rows[1].Lease(), "a"), step(rows[2].Lease(), "a"),
	}
	res, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: batch})
	if err != nil || len(res) != len(batch) {
		t.Fatalf("batch: %+v %v", res, err)
	}
	for i, r := range res {
		if want := i != 2; r.Recorded != want || r.Err != nil {
			t.Fatalf("record %d (%+v): %+v, want recorded %v", i, batch[i], r, want)
		}
	}
	if leased, inPlace := leaseRowsState(t, be); leased != 3 || inPlace != 1 {
		t.Fatalf("after the steps: %d jobs in lease rows and %d running in place, want 3 and 1", leased, inPlace)
	}
	res, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		step(rows[0].Lease(), "a"), step(rows[0].Lease(), "c"), step(stale, "a"),
	}})
	if err != nil || len(res) != 3 || res[0].Recorded || !errors.Is(res[0].Err, backend.ErrStepRecorded) ||
		!res[1].Recorded || res[1].Err != nil || res[2].Recorded || res[2].Err != nil {
		t.Fatalf("a repeated, a new and a stale record: %+v %v", res, err)
	}
	d, err := be.JobDurable(ctx, rows[0].ID)
	if err != nil || len(d.Steps) != 3 {
		t.Fatalf("steps of job %d: %+v %v", rows[0].ID, d, err)
	}
	if d, err := be.JobDurable(ctx, rows[1].ID); err != nil || len(d.Steps) != 1 || string(d.Steps[0].Result) != `"a"` {
		t.Fatalf("steps of job %d: %+v %v", rows[1].ID, d, err)
	}
}
