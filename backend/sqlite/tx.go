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
func (st *store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case st.token <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-st.token }()
	tx, err := st.beginImmediate(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// beginImmediate begins a transaction on the writer pool (the driver issues
// BEGIN IMMEDIATE), waiting for other processes' write locks as the store's
// busy mode says.
func (st *store) beginImmediate(ctx context.Context) (*sql.Tx, error) {
	if st.busy == BusyBackoff {
		// SQLite's own handler waits inside BEGIN, up to busy_timeout.
		tx, err := st.writer.BeginTx(ctx, nil)
		if err != nil {
			return nil, wrapBusy(err, st.busyTimeout)
		}
		return tx, nil
	}
	start := time.Now()
	for {
		tx, err := st.writer.BeginTx(ctx, nil)
		if err == nil {
			return tx, nil
		}
		if !isBusy(err) {
			return nil, fmt.Errorf("begin: %w", err)
		}
		if time.Since(start) >= st.busyTimeout {
			return nil, wrapBusy(err, st.busyTimeout)
		}
		if err := sleepCtx(ctx, fairRetryInterval); err != nil {
			return nil, err
		}
	}
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
