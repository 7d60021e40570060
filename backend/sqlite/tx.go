package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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
	return st.writeTxOf(ctx, fn, false)
}

// takingWriteTx is writeTx for a batch of outcomes, which also runs the
// claims waiting for the token (followWriteTx) in its transaction, after
// fn, each in a savepoint, before it commits (lead): a drain's claim and the
// outcome batch written before it then pay one BEGIN IMMEDIATE and one
// COMMIT, one WAL sync, where they paid two each, and the claim's rows come
// back sooner than after a transaction of its own. A claim holding the token
// runs alone: its rows are what workers wait for, and an outcome batch
// behind it would delay them.
func (st *store) takingWriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return st.writeTxOf(ctx, fn, true)
}

func (st *store) writeTxOf(ctx context.Context, fn func(tx *sql.Tx) error, take bool) error {
	select {
	case st.token <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-st.token }()
	return st.lead(ctx, fn, take)
}

// followWriteTx is writeTx for a claim: while the token is held, fn waits
// as a follower, which a takingWriteTx holding it may run in its own
// transaction. A follower's fn that fails is rolled back to its savepoint
// and returns its error; the holder's and the other followers' writes
// commit. A follower returns once the transaction that ran it has
// committed, or has failed: then with that transaction's error. One not
// taken takes the token itself when it is free, as writeTx does.
func (st *store) followWriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	select {
	case st.token <- struct{}{}:
		defer func() { <-st.token }()
		return st.lead(ctx, fn, false)
	default:
	}
	r := &groupReq{fn: fn, done: make(chan error, 1)}
	st.groupMu.Lock()
	st.group = append(st.group, r)
	st.groupMu.Unlock()
	select {
	case err := <-r.done:
		return err
	case st.token <- struct{}{}:
		if !st.withdraw(r) {
			// Run by the holder that has just released the token, which
			// sent the outcome before it did.
			<-st.token
			return <-r.done
		}
		defer func() { <-st.token }()
		return st.lead(ctx, fn, false)
	case <-ctx.Done():
		if !st.withdraw(r) {
			return <-r.done // taken: it runs, or ran, in the holder's transaction
		}
		return context.Cause(ctx)
	}
}

// groupReq is a followWriteTx's fn waiting for the write token.
type groupReq struct {
	fn    func(tx *sql.Tx) error
	taken bool       // a holder runs it; guarded by store.groupMu
	done  chan error // its outcome, sent by the holder that took it
}

// maxGroup bounds the followers one transaction runs besides its own fn.
const maxGroup = 8

// withdraw removes r from the waiting followers; false when a holder has
// taken it already.
func (st *store) withdraw(r *groupReq) bool {
	st.groupMu.Lock()
	defer st.groupMu.Unlock()
	if r.taken {
		return false
	}
	if i := slices.Index(st.group, r); i >= 0 {
		st.group = slices.Delete(st.group, i, i+1)
	}
	return true
}

// takeGroup takes the followers waiting, up to maxGroup.
func (st *store) takeGroup() []*groupReq {
	st.groupMu.Lock()
	defer st.groupMu.Unlock()
	n := min(len(st.group), maxGroup)
	if n == 0 {
		return nil
	}
	out := slices.Clone(st.group[:n])
	for _, r := range out {
		r.taken = true
	}
	st.group = slices.Delete(st.group, 0, n)
	return out
}

// lead runs fn in a write transaction, holding the token, then, with
// take, the followers waiting (followWriteTx), and commits. Every follower
// it took has its outcome sent before lead returns, so before the token is
// free.
func (st *store) lead(ctx context.Context, fn func(tx *sql.Tx) error, take bool) error {
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
	var followers []*groupReq
	if take {
		followers = st.takeGroup()
	}
	errs := make([]error, len(followers))
	fail := func(err error) error {
		for i, r := range followers {
			if errs[i] == nil {
				errs[i] = err
			}
			r.done <- errs[i]
		}
		return err
	}
	if err := runFollowers(ctx, tx, followers, errs); err != nil {
		st.rollback(tx)
		st.noteHold(acquired)
		return fail(err)
	}
	credited := false
	if now := time.Now(); now.Sub(acquired) >= st.stallThreshold() {
		if err := creditStall(ctx, tx, held(acquired, now)); err != nil {
			st.rollback(tx)
			st.noteHold(acquired)
			return fail(err)
		}
		credited = true
	}
	st.noteFree(time.Now())
	if err := tx.Commit(); err != nil {
		st.noteHold(acquired)
		return fail(fmt.Errorf("commit: %w", err))
	}
	if !credited {
		// Paused in the commit itself: the next write credits it.
		st.noteHold(acquired)
	}
	for i, r := range followers {
		r.done <- errs[i]
	}
	return nil
}

// runFollowers runs each follower's fn in a savepoint of tx, rolling a
// failed one back to it and keeping its error in errs. An error returned
// fails the whole transaction (a savepoint statement failed).
func runFollowers(ctx context.Context, tx *sql.Tx, followers []*groupReq, errs []error) error {
	for i, r := range followers {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT spool_group"); err != nil {
			return fmt.Errorf("grouped write: %w", err)
		}
		if errs[i] = r.fn(tx); errs[i] != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO spool_group"); err != nil {
				return fmt.Errorf("grouped write: roll a failed write back: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE spool_group"); err != nil {
			return fmt.Errorf("grouped write: %w", err)
		}
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
// busy mode says. It returns when it got the lock. With the fair handler,
// every busy attempt is recorded as a possible stall (noteBusy).
func (st *store) beginImmediate(ctx context.Context) (*sql.Tx, time.Time, error) {
	if st.busy == BusyBackoff {
		// SQLite's own handler waits inside BEGIN, up to busy_timeout.
		tx, err := st.writer.BeginTx(ctx, nil)
		if err != nil {
			return nil, time.Time{}, wrapBusy(err, st.busyTimeout)
		}
		return tx, time.Now(), nil
	}
	start := time.Now()
	for {
		tx, err := st.writer.BeginTx(ctx, nil)
		if err == nil {
			return tx, time.Now(), nil
		}
		if !isBusy(err) {
			return nil, time.Time{}, fmt.Errorf("begin: %w", err)
		}
		now := time.Now()
		st.noteBusy(ctx, now)
		if now.Sub(start) >= st.busyTimeout {
			return nil, time.Time{}, wrapBusy(err, st.busyTimeout)
		}
		if err := sleepCtx(ctx, fairRetryInterval); err != nil {
			return nil, time.Time{}, err
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

// writeTaking is write with takingWriteTx for the store's own transaction.
func (st *store) writeTaking(ctx context.Context, tx *sql.Tx, fn func(tx *sql.Tx) error) error {
	if tx != nil {
		return fn(tx)
	}
	return st.takingWriteTx(ctx, fn)
}
