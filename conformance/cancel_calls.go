package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// StoreLock is a lock another session holds on a store: every call of the
// worker loop (claim, finish, heartbeat, insert) waits behind it.
type StoreLock struct {
	// Waiting reports whether some session waits for the lock now (false
	// with a nil error: none yet).
	Waiting func(ctx context.Context) (bool, error)
	// Unlock releases the lock.
	Unlock func()
}

// lockGuard bounds every wait of CallsHonourCancel: past it the test fails
// instead of hanging. It is no measure of promptness: the assertion is
// that the call returned while the lock was still held.
const lockGuard = time.Minute

// testCallsHonourCancel: each store call the worker loop makes, waiting
// behind a lock another session holds, returns a context error when its
// context is cancelled, while the lock is still held: a stop's deadline,
// a heartbeat's or a claim's timeout cut the call off rather than wait for
// the lock (a driver that ignores cancellation, a busy handler that sleeps
// through it). A store with no lock another session can hold (Harness.Lock
// nil) is checked with a context cancelled before the call: it returns
// (done or with the context's error), as it never waits.
func testCallsHonourCancel(t *testing.T, h Harness) {
	ctx := context.Background()
	be := h.NewBackend(t)
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "cancel", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "cancel", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3},
	}})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	if len(res.IDs) != 2 {
		t.Fatalf("inserted %d jobs, want 2", len(res.IDs))
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "cancel", Max: 1, Lease: time.Minute, ClaimID: "cancel#1"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d jobs, %v; want 1", len(rows), err)
	}
	lease := rows[0].Lease()
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"claim", func(ctx context.Context) error {
			_, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "cancel", Max: 1, Lease: time.Minute, ClaimID: "cancel#2"})
			return err
		}},
		{"heartbeat", func(ctx context.Context) error {
			res, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: []backend.LeaseRef{lease}, Lease: time.Minute})
			if err == nil && res.Err != nil {
				err = res.Err
			}
			return err
		}},
		{"finish", func(ctx context.Context) error {
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: lease, Outcome: backend.OutcomeComplete}}})
			if err == nil && res.Err != nil {
				err = res.Err
			}
			return err
		}},
		{"insert", func(ctx context.Context) error {
			_, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{Queue: "cancel", Kind: "k", Args: []byte(`{}`), MaxAttempts: 3}}})
			return err
		}},
	}
	for _, c := range calls {
		if h.Lock == nil {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			// Such a store never waits: it may finish the call anyway.
			if err := c.call(cctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context: %v, want success or context.Canceled", c.name, err)
			}
			continue
		}
		lock := h.Lock(t, be)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.call(cctx) }()
		guard := time.NewTimer(lockGuard)
		// The call is cancelled once it waits for the lock, not before:
		// a call cancelled before it is sent returns at once anyway.
		for waiting := false; !waiting; {
			select {
			case err := <-done:
				cancel()
				lock.Unlock()
				t.Fatalf("%s returned behind the lock before it was cancelled: %v", c.name, err)
			case <-guard.C:
				cancel()
				lock.Unlock()
				t.Fatalf("%s: no session waited for the lock within %s", c.name, lockGuard)
			default:
			}
			waiting, err = lock.Waiting(ctx)
			if err != nil {
				cancel()
				lock.Unlock()
				t.Fatalf("%s: look for sessions waiting for the lock: %v", c.name, err)
			}
			if !waiting {
				time.Sleep(5 * time.Millisecond) // a look at the server's lock table, not a synchronisation
			}
		}
		cancel()
		returned := false
		select {
		case err := <-done:
			returned = true
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s cancelled behind the lock: %v, want context.Canceled", c.name, err)
			}
		case <-guard.C:
			t.Errorf("%s did not return within %s of its cancellation while the lock was held: it waits for the lock through its context's end", c.name, lockGuard)
		}
		guard.Stop()
		lock.Unlock()
		if !returned {
			<-done // it returns only once the lock is gone
		}
	}
}
