package sqlite_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/conformance"
)

// lockStore holds the write lock of be's file from another connection
// (conformance.Harness.Lock): a write transaction that has written. Every
// call of the worker loop writes, so each waits for it; one is waiting
// once the fair busy handler has found the lock held since the lock was
// taken.
func lockStore(t *testing.T, be backend.Backend) conformance.StoreLock {
	sb := be.(*sqlite.Backend)
	holder := reopen(t, sb)
	release := holdWriteLock(t, holder)
	from := sqlite.BusyWaits(sb)
	return conformance.StoreLock{
		Waiting: func(context.Context) (bool, error) { return sqlite.BusyWaits(sb) > from, nil },
		Unlock:  func() { release(false) },
	}
}
