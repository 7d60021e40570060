package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

func oneJob() *backend.JobInsertManyParams {
	return &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
		Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 3,
	}}}
}

// holdWriteLock opens a write transaction on be's file that has written, so
// it holds the write lock until released.
func holdWriteLock(t *testing.T, be *sqlite.Backend) (release func(commit bool)) {
	t.Helper()
	tx, err := be.DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Tx: tx, Jobs: oneJob().Jobs}); err != nil {
		t.Fatal(err)
	}
	return func(commit bool) {
		var err error
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Error(err)
		}
	}
}

// TestBusyTimeout: a writer of another connection waits for the lock for
// its busy timeout, then fails with ErrBusy and writes nothing; once the
// lock is free it succeeds. Both busy modes.
func TestBusyTimeout(t *testing.T) {
	for _, mode := range []string{sqlite.BusyFair, sqlite.BusyBackoff} {
		t.Run(mode, func(t *testing.T) {
			holder := newBackend(t, nil)
			waiter, err := sqlite.OpenPath(context.Background(), holder.Path(),
				&sqlite.Options{Separate: true, Busy: mode, BusyTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()
			release := holdWriteLock(t, holder)
			start := time.Now()
			_, err = waiter.JobInsertMany(context.Background(), oneJob())
			if !errors.Is(err, sqlite.ErrBusy) {
				t.Fatalf("err = %v, want ErrBusy", err)
			}
			if waited := time.Since(start); waited < 200*time.Millisecond {
				t.Fatalf("gave up after %s, before the busy timeout", waited)
			}
			release(false)
			if _, err := waiter.JobInsertMany(context.Background(), oneJob()); err != nil {
				t.Fatalf("after release: %v", err)
			}
			if n := len(countRows(t, waiter)); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
}

// TestBusyWaitSucceeds: a writer that finds the lock held waits, and
// succeeds once the holder commits within the timeout.
func TestBusyWaitSucceeds(t *testing.T) {
	holder := newBackend(t, nil)
	waiter := reopen(t, holder)
	release := holdWriteLock(t, holder)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.JobInsertMany(context.Background(), oneJob())
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("insert finished while the lock was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(countRows(t, waiter)); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

func countRows(t *testing.T, be *sqlite.Backend) []*backend.JobRow {
	t.Helper()
	rows, err := be.JobList(context.Background(), &backend.JobListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestBusyWaitHonoursCancel: a writer waiting for a lock another connection
// holds returns its context's error when the context is cancelled, the lock
// still held, in both busy modes. The backoff mode once waited inside
// SQLite's own handler, which sleeps through an interrupt: with
// mattn/go-sqlite3 the call returned only when the lock was released.
func TestBusyWaitHonoursCancel(t *testing.T) {
	for _, mode := range []string{sqlite.BusyFair, sqlite.BusyBackoff} {
		t.Run(mode, func(t *testing.T) {
			holder := newBackend(t, nil)
			waiter, err := sqlite.OpenPath(context.Background(), holder.Path(),
				&sqlite.Options{Separate: true, Busy: mode, BusyTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()
			release := holdWriteLock(t, holder)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := waiter.JobInsertMany(ctx, oneJob())
				done <- err
			}()
			guard := time.NewTimer(time.Minute) // fails instead of hanging; no measure
			defer guard.Stop()
			for sqlite.BusyWaits(waiter) == 0 {
				select {
				case err := <-done:
					t.Fatalf("insert returned while the lock was held: %v", err)
				case <-guard.C:
					t.Fatal("the insert never found the lock held")
				case <-time.After(time.Millisecond): // a look at the counter, not a synchronisation
				}
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled insert: %v, want context.Canceled", err)
				}
			case <-guard.C:
				release(false)
				t.Fatalf("the cancelled insert waited for the lock: %v", <-done)
			}
			release(false)
		})
	}
}
