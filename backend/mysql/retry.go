package mysql

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers the backend retries: InnoDB rolled the victim's
// transaction (deadlock) or statement (lock wait timeout) back, so the whole
// operation can run again from its start.
const (
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
)

// maxLockRetries bounds the tries of one operation that keeps hitting
// deadlocks or lock wait timeouts. On a Galera node there is no bound but
// the caller's context: there, a deadlock is mostly another node's commit
// certified first (two nodes claimed the same rows, each under its own
// locks), which happens as often as nodes write the same rows, and the
// operation is still valid to run again.
const maxLockRetries = 10

// Metrics counts events inside the backend since it was opened.
type Metrics struct {
	// Deadlocks is how many of the backend's own transactions InnoDB chose
	// as a deadlock victim; each was rolled back and run again.
	Deadlocks uint64
	// LockWaitTimeouts is how many statements of the backend's own
	// transactions timed out waiting for a row lock; each transaction was
	// rolled back and run again.
	LockWaitTimeouts uint64
	// RetriesExhausted is how many operations still failed on a deadlock or
	// lock wait timeout after maxLockRetries tries; their error was returned.
	RetriesExhausted uint64
	// OptimisticConflicts is how many rows the optimistic strategy picked
	// but another claimer took first.
	OptimisticConflicts uint64
	// OptimisticRounds is how many window reads the optimistic strategy did.
	OptimisticRounds uint64
	// Claims is how many JobClaim calls returned, and ClaimTime their
	// time from call to return, summed: over a span of wall time, the
	// change in ClaimTime divided by the span is the mean number of claims
	// in flight (bench drain reports it).
	Claims    uint64
	ClaimTime time.Duration
	// Finishes and FinishTime are the same for JobFinishMany calls (the
	// engine's outcome writes among them).
	Finishes   uint64
	FinishTime time.Duration
}

type metrics struct {
	deadlocks, lockWaits, exhausted, conflicts, rounds atomic.Uint64
	claims, finishes                                   callTimes
}

// callTimes counts calls of one kind and sums their durations.
type callTimes struct {
	n     atomic.Uint64
	nanos atomic.Int64
}

// since counts a call that began at start and returns now.
func (c *callTimes) since(start time.Time) {
	c.nanos.Add(int64(time.Since(start)))
	c.n.Add(1)
}

// DeadlockRetries implements backend.DeadlockCounter: transactions retried
// after a deadlock or a lock wait timeout.
func (b *Backend) DeadlockRetries() uint64 {
	return b.metrics.deadlocks.Load() + b.metrics.lockWaits.Load()
}

// Metrics returns the backend's counters.
func (b *Backend) Metrics() Metrics {
	return Metrics{
		Deadlocks:           b.metrics.deadlocks.Load(),
		LockWaitTimeouts:    b.metrics.lockWaits.Load(),
		RetriesExhausted:    b.metrics.exhausted.Load(),
		OptimisticConflicts: b.metrics.conflicts.Load(),
		OptimisticRounds:    b.metrics.rounds.Load(),
		Claims:              b.metrics.claims.n.Load(),
		ClaimTime:           time.Duration(b.metrics.claims.nanos.Load()),
		Finishes:            b.metrics.finishes.n.Load(),
		FinishTime:          time.Duration(b.metrics.finishes.nanos.Load()),
	}
}

// lockErrorNumber returns 1213 or 1205 when err is a deadlock or lock wait
// timeout, and 0 otherwise.
func lockErrorNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == errLockDeadlock || me.Number == errLockWaitTimeout) {
		return me.Number
	}
	return 0
}

// IsLockConflict reports whether err is a MySQL deadlock (1213) or lock wait
// timeout (1205). The backend retries these in its own transactions; inside
// a caller's transaction it returns them, and the caller should run its
// whole transaction again.
func IsLockConflict(err error) bool { return lockErrorNumber(err) != 0 }

// retry runs fn until it returns something other than a deadlock or lock
// wait timeout, up to maxLockRetries times, counting each. fn must be a whole
// operation: its own transaction, rolled back on error.
func (b *Backend) retry(ctx context.Context, fn func() error) error {
	backoff := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		switch lockErrorNumber(err) {
		case 0:
			return err
		case errLockDeadlock:
			b.metrics.deadlocks.Add(1)
		case errLockWaitTimeout:
			b.metrics.lockWaits.Add(1)
		}
		if attempt >= maxLockRetries && !b.server.galera {
			b.metrics.exhausted.Add(1)
			return err
		}
		// Jittered, so two victims of the same cycle do not meet again.
		t := time.NewTimer(backoff/2 + rand.N(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// inTx runs fn in a transaction of the backend's own (READ COMMITTED, set on
// every session), retrying the whole transaction on lock conflicts.
func (b *Backend) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return b.retry(ctx, func() error {
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}
