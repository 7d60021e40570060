package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// TestSmallClaimsPassTheClaimLock: once a queue's claims are small, a claim
// takes its jobs while another session holds the queue's claim lock; one
// that comes back full takes the rest of its ask under the lock, so the
// queue's next claim, expected large, waits for the lock again.
func TestSmallClaimsPassTheClaimLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	db, schema := be.DB(), "`"+be.Database()+"`"
	insert, claim := queueQ(t, ctx, be)
	holdLock := func() func() {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+schema+".spool_flow_stripes (queue, stripe) VALUES ('q', -1) ON DUPLICATE KEY UPDATE stripe = stripe"); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The queue's first claim finds nothing: its next is expected small.
	if jobs, err := claim(10); err != nil || len(jobs) != 0 {
		t.Fatalf("first claim: %d jobs, %v; want none", len(jobs), err)
	}
	release := holdLock()
	insert(2)
	if jobs, err := claim(10); err != nil || len(jobs) != 2 {
		t.Fatalf("small claim with the claim lock held elsewhere: %d jobs, %v; want 2", len(jobs), err)
	}
	release()

	// A backlog: the small part comes back full, the rest under the lock.
	insert(100)
	jobs, err := claim(90)
	if err != nil || len(jobs) != 90 {
		t.Fatalf("claim of a backlog: %d jobs, %v; want 90", len(jobs), err)
	}
	seen := map[int64]bool{}
	for _, j := range jobs {
		if seen[j.ID] || j.State != backend.StateRunning {
			t.Fatalf("claim of a backlog returned job %d twice or not running (%s)", j.ID, j.State)
		}
		seen[j.ID] = true
	}

	// That claim took 64 or more: the next waits for the lock.
	release = holdLock()
	done := make(chan error, 1)
	go func() {
		jobs, err := claim(10)
		if err == nil && len(jobs) != 10 {
			err = errFewer(len(jobs))
		}
		done <- err
	}()
	waitFor(t, "the backlog claim to wait for the claim lock", func() bool {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.PROCESSLIST
WHERE COMMAND = 'Query' AND INFO LIKE concat('%', ?, '.spool_flow_stripes%')`, schema).Scan(&n)
		select {
		case err := <-done:
			t.Fatalf("the claim returned with the lock held elsewhere: %v", err)
		default:
		}
		return err == nil && n > 0
	})
	release()
	if err := <-done; err != nil {
		t.Fatalf("claim after the lock's release: %v", err)
	}
}

// TestShortClaimExpectsSmall: a claim that took 64 jobs or more but came
// back short of its ask drained the queue's backlog, so the queue's next
// claim is expected small and takes its jobs while another session holds
// the claim lock; expected large, it waited for the lock.
func TestShortClaimExpectsSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	db, schema := be.DB(), "`"+be.Database()+"`"
	insert, claim := queueQ(t, ctx, be)
	insert(100)
	if jobs, err := claim(200); err != nil || len(jobs) != 100 {
		t.Fatalf("claim of the backlog: %d jobs, %v; want 100", len(jobs), err)
	}
	insert(2)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+schema+".spool_flow_stripes (queue, stripe) VALUES ('q', -1) ON DUPLICATE KEY UPDATE stripe = stripe"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		jobs []*backend.JobRow
		err  error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := claim(10)
		done <- result{jobs, err}
	}()
	var r result
	waitFor(t, "the claim after a short one to return", func() bool {
		select {
		case r = <-done:
			return true
		default:
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.PROCESSLIST
WHERE COMMAND = 'Query' AND INFO LIKE concat('%', ?, '.spool_flow_stripes%')`, schema).Scan(&n); err == nil && n > 0 {
			t.Fatal("the claim after one that came back short waited for the claim lock")
		}
		return false
	})
	if r.err != nil || len(r.jobs) != 2 {
		t.Fatalf("claim after a short one: %d jobs, %v; want 2", len(r.jobs), r.err)
	}
}

type errFewer int

func (e errFewer) Error() string { return "claimed fewer jobs than asked" }

// TestClaimAfterEmptyProbes: a small claim of a queue whose last claim
// came back empty is answered by a plain read when the queue has no due
// job (a poll of an idle queue: one round trip instead of a transaction),
// and still claims the jobs that came meanwhile; a scheduled job is not
// due, so the probe answers for it too.
func TestClaimAfterEmptyProbes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	claim := func() []*backend.JobRow {
		t.Helper()
		jobs, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	insert := func(runAt *time.Time) {
		t.Helper()
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
			{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3, RunAt: runAt},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if jobs := claim(); len(jobs) != 0 {
		t.Fatalf("first claim: %d jobs, want none", len(jobs))
	}
	later := time.Now().Add(time.Hour)
	insert(&later)
	for i := range 2 {
		if jobs := claim(); len(jobs) != 0 {
			t.Fatalf("claim %d of an idle queue: %d jobs, want none", i+2, len(jobs))
		}
	}
	if n := be.ClaimsProbedEmpty(); n != 2 {
		t.Fatalf("%d claims of the idle queue answered by the probe, want 2", n)
	}
	insert(nil)
	if jobs := claim(); len(jobs) != 1 {
		t.Fatalf("claim after a job came: %d jobs, want 1", len(jobs))
	}
	if n := be.ClaimsProbedEmpty(); n != 2 {
		t.Fatalf("the probe answered the claim of a due job (%d probed empty, want 2)", n)
	}
}

// queueQ returns functions that insert n plain jobs into queue "q" of be
// and claim up to max of them (claim id "c").
func queueQ(t *testing.T, ctx context.Context, be *mysql.Backend) (insert func(n int), claim func(max int) ([]*backend.JobRow, error)) {
	insert = func(n int) {
		t.Helper()
		jobs := make([]*backend.JobInsertParams, n)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
	}
	claim = func(max int) ([]*backend.JobRow, error) {
		return be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: max, Lease: time.Minute, ClaimID: "c"})
	}
	return insert, claim
}
