package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SQLite result codes the backend tells apart (primary codes: the low byte of
// an extended code).
const (
	codePerm     = 3
	codeBusy     = 5
	codeLocked   = 6
	codeReadOnly = 8
	codeCantOpen = 14
	codeNotADB   = 26
)

// isBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY).
func isBusy(err error) bool {
	c := sqliteCode(err)
	return c == codeBusy || c == codeLocked
}

// fairRetryInterval is the fair busy handler's constant retry interval.
const fairRetryInterval = time.Millisecond

// writeTx runs fn in a write transaction of the store's writer connection and
// commits it. It first takes the write token (so this process's writers go
// in arrival order), then begins IMMEDIATE: with the fair busy handler it
// retries every millisecond while another process holds the write lock, until
// the busy timeout.
//
// Stalls (stall.go): right after BEGIN, before fn, it credits the stalls this
// process has seen to running leases; a transaction that held the lock for
// at least the stall threshold credits its own hold just before it commits.
// Nothing else is done while the lock is held: callers prepare their
// statements' arguments before and decode results after.
func (st *store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case st.token <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-st.token }()
	tx, acquired, err := st.beginImmediate(ctx)
	if err != nil {
		return err
	}
	if err := st.creditSeenStalls(ctx, tx); err != nil {
		st.rollback(tx)
		return err
	}
	if err := fn(tx); err != nil {
		st.rollback(tx)
		st.noteHold(acquired)
		return err
	}
	credited := false
	if now := time.Now(); now.Sub(acquired) >= st.stallThreshold() {
		if err := creditStall(ctx, tx, held(acquired, now)); err != nil {
			st.rollback(tx)
			st.noteHold(acquired)
			return err
		}
		credited = true
	}
	st.noteFree(time.Now())
	if err := tx.Commit(); err != nil {
		st.noteHold(acquired)
		return fmt.Errorf("commit: %w", err)
	}
	if !credited {
		// Paused in the commit itself: the next write credits it.
		st.noteHold(acquired)
	}
	return nil
}

// rollback rolls tx back; the lock is free after it.
func (st *store) rollback(tx *sql.Tx) {
	st.noteFree(time.Now())
	_ = tx.Rollback()
}

// noteHold keeps this process's own hold of the lock, from acquired until
// now, for the next write transaction to credit, when it was long enough
// and not credited in its own transaction (rolled back, or the commit
// itself was slow).
func (st *store) noteHold(acquired time.Time) {
	st.noteStall(held(acquired, time.Now()))
}

// beginImmediate begins a transaction on the writer pool (the driver issues
// BEGIN IMMEDIATE), waiting for other processes' write locks as the store's
// busy mode says: every millisecond (fair), or after sleeps that grow as
// SQLite's own handler's do (backoff). It returns when it got the lock.
// With the fair handler, every busy attempt is recorded as a possible stall
// (noteBusy).
//
// Both modes wait here, in Go, between attempts, so that a cancelled
// context ends the wait: SQLite's built-in handler (busy_timeout) sleeps
// inside the C call, and with mattn/go-sqlite3 a call cancelled while it
// waited there returned only when the lock was released or its busy
// timeout ended (sqlite3_interrupt does not cut the handler's sleeps).
func (st *store) beginImmediate(ctx context.Context) (*sql.Tx, time.Time, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		tx, err := st.writer.BeginTx(ctx, nil)
		if err == nil {
			return tx, time.Now(), nil
		}
		if !isBusy(err) {
			return nil, time.Time{}, fmt.Errorf("begin: %w", err)
		}
		st.busyWaits.Add(1)
		now := time.Now()
		wait := fairRetryInterval
		if st.busy == BusyBackoff {
			wait = backoffDelay(attempt)
		} else {
			st.noteBusy(ctx, now)
		}
		left := st.busyTimeout - now.Sub(start)
		if left <= 0 {
			return nil, time.Time{}, wrapBusy(err, st.busyTimeout)
		}
		if err := sleepCtx(ctx, min(wait, left)); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// backoffDelays are the sleeps of SQLite's built-in busy handler
// (sqliteDefaultBusyCallback), in order; past the last, it sleeps as long
// as the last.
var backoffDelays = [...]time.Duration{1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100}

// backoffDelay is the sleep after the attempt-th busy attempt (from 0) of
// the backoff mode.
func backoffDelay(attempt int) time.Duration {
	return backoffDelays[min(attempt, len(backoffDelays)-1)] * time.Millisecond
}

// wrapBusy wraps a busy error with ErrBusy and the timeout that ran out.
func wrapBusy(err error, timeout time.Duration) error {
	if isBusy(err) {
		return fmt.Errorf("begin: %w after %s: %v", ErrBusy, timeout, err)
	}
	return fmt.Errorf("begin: %w", err)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// write runs fn in the caller's transaction when there is one, and otherwise
// in a write transaction of the store's own.
func (st *store) write(ctx context.Context, tx *sql.Tx, fn func(tx *sql.Tx) error) error {
	if tx != nil {
		return fn(tx)
	}
	return st.writeTx(ctx, fn)
}
