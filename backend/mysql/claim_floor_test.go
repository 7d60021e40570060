package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// floorQueue is a queue of a backend of the test's own whose claims go
// through the claim lock and so read above its claim floor.
type floorQueue struct {
	t      *testing.T
	ctx    context.Context
	be     *mysql.Backend
	schema string
}

func newFloorQueue(t *testing.T) *floorQueue {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	be := newBackend(t, nil)
	return &floorQueue{t: t, ctx: ctx, be: be, schema: "`" + be.Database() + "`"}
}

// insert inserts n jobs of priority prio, run at runAt (nil: now), in
// transaction tx (nil: the backend's own), and returns their ids.
func (q *floorQueue) insert(tx *sql.Tx, n int, prio int16, runAt *time.Time) []int64 {
	q.t.Helper()
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3, Priority: prio, RunAt: runAt}
	}
	p := &backend.JobInsertManyParams{Jobs: jobs}
	if tx != nil {
		p.Tx = tx
	}
	res, err := q.be.JobInsertMany(q.ctx, p)
	if err != nil {
		q.t.Fatal(err)
	}
	return res.IDs
}

// claim claims up to max jobs as claim id and returns their ids in claim
// order. Every claim of these tests asks for more than the small claims'
// 64 and gets it, so the next goes through the claim lock too.
func (q *floorQueue) claim(id string, max int) []int64 {
	q.t.Helper()
	jobs, err := q.be.JobClaim(q.ctx, &backend.JobClaimParams{Queue: "q", Max: max, Lease: time.Minute, ClaimID: id})
	if err != nil {
		q.t.Fatal(err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// ageHead makes the queue's last read from the head older than a claim
// under the lock waits for, as the passing of that time would: the next
// such claim reads from the head.
func (q *floorQueue) ageHead() {
	q.t.Helper()
	if _, err := q.be.DB().ExecContext(q.ctx, "UPDATE "+q.schema+".spool_flow_stripes SET head_at = head_at - INTERVAL 2 SECOND WHERE queue = 'q' AND stripe = -1"); err != nil {
		q.t.Fatal(err)
	}
}

// floor is the queue's claim floor's id, 0 for none.
func (q *floorQueue) floor() int64 {
	q.t.Helper()
	var id sql.NullInt64
	if err := q.be.DB().QueryRowContext(q.ctx, "SELECT floor_id FROM "+q.schema+".spool_flow_stripes WHERE queue = 'q' AND stripe = -1").Scan(&id); err != nil {
		q.t.Fatal(err)
	}
	return id.Int64
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// stranded checks the straggler kind's jobs: a claim above the floor
// passes them, and the first claim from the head, once the last is older
// than the head interval, takes them first.
func (q *floorQueue) stranded(stragglers []int64) {
	q.t.Helper()
	got := q.claim("above", 100)
	if len(got) != 100 {
		q.t.Fatalf("claim above the floor: %d jobs, want 100", len(got))
	}
	for _, id := range stragglers {
		if contains(got, id) {
			q.t.Fatalf("claim above the floor took job %d below it (the test made no straggler)", id)
		}
	}
	q.ageHead()
	got = q.claim("head", 100)
	if len(got) < len(stragglers) {
		q.t.Fatalf("claim from the head: %d jobs, want at least %d", len(got), len(stragglers))
	}
	for i, id := range stragglers {
		if got[i] != id {
			q.t.Fatalf("claim from the head: job %d at %d, want the straggler %d first (got %v)", got[i], i, id, got[:len(stragglers)])
		}
	}
}

// TestClaimFloorReadsAboveTheLastClaim: a claim under the claim lock moves
// the queue's floor to the last row it took, and the next starts above it.
func TestClaimFloorReadsAboveTheLastClaim(t *testing.T) {
	q := newFloorQueue(t)
	ids := q.insert(nil, 300, 0, nil)
	if got := q.claim("a", 100); len(got) != 100 || got[0] != ids[0] || got[99] != ids[99] {
		t.Fatalf("first claim: %v, want the first 100 jobs", got)
	}
	if f := q.floor(); f != ids[99] {
		t.Fatalf("floor %d after the first claim, want %d", f, ids[99])
	}
	if got := q.claim("b", 100); len(got) != 100 || got[0] != ids[100] {
		t.Fatalf("second claim: starts at %v, want %d", got[:1], ids[100])
	}
	if f := q.floor(); f != ids[199] {
		t.Fatalf("floor %d after the second claim, want %d", f, ids[199])
	}
}

// TestClaimFloorReleasedClaim: a released claim's jobs keep their run_at,
// below the floor: the next claim from the head takes them.
func TestClaimFloorReleasedClaim(t *testing.T) {
	q := newFloorQueue(t)
	ids := q.insert(nil, 400, 0, nil)
	lost := q.claim("lost", 100)
	if n, err := q.be.JobReleaseClaim(q.ctx, &backend.JobReleaseClaimParams{ClaimID: "lost"}); err != nil || n != 100 {
		t.Fatalf("release: %d, %v", n, err)
	}
	if lost[0] != ids[0] {
		t.Fatalf("claim: %v", lost[:1])
	}
	q.stranded(lost)
}

// TestClaimFloorRescuedJobs: a rescued job keeps its run_at, below the
// floor.
func TestClaimFloorRescuedJobs(t *testing.T) {
	q := newFloorQueue(t)
	q.insert(nil, 400, 0, nil)
	dead := q.claim("dead", 100)
	if _, err := q.be.DB().ExecContext(q.ctx, "UPDATE "+q.schema+".spool_jobs SET leased_until = '2000-01-01' WHERE leased_by = 'dead'"); err != nil {
		t.Fatal(err)
	}
	if res, err := q.be.JobRescue(q.ctx, &backend.JobRescueParams{}); err != nil || res.Retried != 100 {
		t.Fatalf("rescue: %+v, %v", res, err)
	}
	q.stranded(dead)
}

// TestClaimFloorInsertCommittedLate: an insert whose transaction commits
// after a claim took later jobs (its run_at is its statement's time), and
// one with a run time in the past.
func TestClaimFloorInsertCommittedLate(t *testing.T) {
	q := newFloorQueue(t)
	tx, err := q.be.DB().BeginTx(q.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	late := q.insert(tx, 2, 0, nil)
	q.insert(nil, 400, 0, nil)
	if got := q.claim("first", 100); contains(got, late[0]) {
		t.Fatal("a claim took an uncommitted job")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	q.stranded(append(q.insert(nil, 1, 0, &past), late...))
}

// TestClaimFloorRolledBackSmallClaim: rows a claim without the lock held
// while a claim under the lock passed them, and then gave back (a small
// claim that rolled back), are below the floor.
func TestClaimFloorRolledBackSmallClaim(t *testing.T) {
	q := newFloorQueue(t)
	ids := q.insert(nil, 400, 0, nil)
	held := lockRow(t, q.be.DB(), q.be.Database(), ids[0])
	if got := q.claim("pass", 100); contains(got, ids[0]) || got[0] != ids[1] {
		t.Fatalf("claim with job %d held elsewhere: starts %v", ids[0], got[:1])
	}
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	q.stranded(ids[:1])
}

// TestClaimFloorUrgentPriority: a job of a more urgent priority than the
// floor's is claimed by the next claim, floor or not, and a less urgent
// one after the floor priority's jobs.
func TestClaimFloorUrgentPriority(t *testing.T) {
	q := newFloorQueue(t)
	q.insert(nil, 400, 5, nil)
	q.claim("a", 100)
	urgent := q.insert(nil, 2, 1, nil)
	got := q.claim("b", 100)
	if len(got) != 100 || got[0] != urgent[0] || got[1] != urgent[1] {
		t.Fatalf("claim after urgent jobs came: starts %v, want %v", got[:2], urgent)
	}
	// The floor is now at the end of that claim, priority 5; a claim of
	// the rest takes the 202 left, then the less urgent one.
	lazy := q.insert(nil, 1, 9, nil)
	got = q.claim("c", 300)
	if len(got) != 203 || got[202] != lazy[0] {
		t.Fatalf("claim of the rest: %d jobs, last %d; want 203, last %d", len(got), got[len(got)-1], lazy[0])
	}
}

// TestClaimFloorSelectIsARange: the claim above a floor reads ranges of
// the claim index in its order, with no sort.
func TestClaimFloorSelectIsARange(t *testing.T) {
	q := newFloorQueue(t)
	q.insert(nil, 2000, 0, nil)
	q.claim("a", 1000)
	if _, err := q.be.DB().ExecContext(q.ctx, "ANALYZE TABLE "+q.schema+".spool_jobs"); err != nil {
		t.Fatal(err)
	}
	var (
		prio  int16
		runAt time.Time
		id    int64
	)
	if err := q.be.DB().QueryRowContext(q.ctx, "SELECT floor_priority, floor_run_at, floor_id FROM "+q.schema+".spool_flow_stripes WHERE queue = 'q' AND stripe = -1").Scan(&prio, &runAt, &id); err != nil {
		t.Fatal(err)
	}
	at := runAt.UTC().Format("2006-01-02 15:04:05.999999")
	rows, err := q.be.DB().QueryContext(q.ctx, "EXPLAIN "+q.be.ClaimSelectFloor()+"\nLIMIT 1000 FOR UPDATE SKIP LOCKED", "q", "q", prio, prio, prio, at, at, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	found := false
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		if row["table"] != "spool_jobs" {
			continue
		}
		found = true
		if row["type"] != "range" || row["key"] != "spool_jobs_claim" || strings.Contains(row["Extra"], "filesort") {
			t.Errorf("EXPLAIN of the claim above the floor: %v; want a range of spool_jobs_claim, no filesort", row)
		}
		t.Logf("EXPLAIN: %v", row)
	}
	if err := rows.Err(); err != nil || !found {
		t.Fatalf("EXPLAIN: %v, spool_jobs found %v", err, found)
	}
}
