package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestClaimTakesMoreUnderTheClaimLock: a claim under the queue's claim
// lock asks its caller, once it holds the lock, for the room made while it
// waited (JobClaimParams.More) and takes that many jobs beyond Max, the
// queue's first in claim order; a small claim, which does not wait for
// the lock, does not ask.
func TestClaimTakesMoreUnderTheClaimLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, nil)
	jobs := make([]*backend.JobInsertParams, 100)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3, Priority: int16(i / 50)}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	asks := 0
	claim := func(max, more int) []*backend.JobRow {
		t.Helper()
		got, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: max, Lease: time.Minute, ClaimID: "c",
			More: func() int { asks++; return more }})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// The queue's first claim is not expected small: it waits for the
	// lock, and takes its ask and the room made meanwhile.
	got := claim(10, 25)
	if len(got) != 35 || asks != 1 {
		t.Fatalf("claim of 10 with 25 more under the lock: %d jobs, More called %d times; want 35, once", len(got), asks)
	}
	// They are the queue's first 35 in claim order: of the better
	// priority, in claim order.
	prev := got[0]
	for _, j := range got[1:] {
		if backend.ClaimOrder(prev, j) >= 0 || j.State != backend.StateRunning {
			t.Fatalf("claim returned %d (priority %d) after %d (priority %d), or not running", j.ID, j.Priority, prev.ID, prev.Priority)
		}
		prev = j
	}
	for _, j := range got {
		if j.Priority != 0 {
			t.Fatalf("claim of 35 of 100 jobs, 50 of each of two priorities, took one of priority %d", j.Priority)
		}
	}

	// The rest of the backlog: short of the ask, but 64 or more, so the
	// next claim is still expected large.
	asks = 0
	if got := claim(100, 25); len(got) != 65 || asks != 1 {
		t.Fatalf("claim of the last 65 jobs: %d jobs, More called %d times; want 65, once", len(got), asks)
	}
	insert := func(n int) {
		t.Helper()
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs[:n]}); err != nil {
			t.Fatal(err)
		}
	}
	insert(20)
	if got := claim(30, 25); len(got) != 20 {
		t.Fatalf("claim of 20 new jobs: %d jobs, want 20", len(got))
	}
	// That claim took fewer than 64: the next is expected small, takes
	// its jobs without the lock and does not ask for more.
	insert(20)
	asks = 0
	if got := claim(10, 25); len(got) != 10 || asks != 0 {
		t.Fatalf("small claim of 10: %d jobs, More called %d times; want 10, never", len(got), asks)
	}
}
