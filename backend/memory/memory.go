// Package memory is a Spool backend that keeps jobs in the process's memory:
// no database, no SQL. It is for tests, examples and programs whose jobs may
// be lost with the process; nothing survives a restart.
//
// It implements backend.Backend with the same semantics as the SQL backends
// (the claim order, fences, attempts, rescue, retention) and passes the same
// conformance suite, so it also shows that the backend seam is about jobs,
// not SQL. Time is the process's clock. Transactions (Begin) buffer inserts
// and completions until Commit, as a database transaction would.
//
// Open it with New, or with backend.Open("memory://NAME"): every Open of one
// NAME in a process shares one store, as every connection to one database
// would.
package memory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/spoolq/spool/backend"
)

func init() {
	backend.Register(func(_ context.Context, dsn string) (backend.Backend, error) {
		u, err := url.Parse(dsn)
		if err != nil || u.Scheme != "memory" {
			return nil, fmt.Errorf("open memory backend: %q is not memory://NAME", dsn)
		}
		return Named(u.Host + u.Path), nil
	}, "memory")
}

// ErrConflict is returned by Tx.Commit when a job the transaction completed
// was meanwhile claimed again, rescued or cancelled: nothing of the
// transaction is applied, as a database would have blocked or failed the
// transaction on the row.
var ErrConflict = errors.New("memory: a job completed in the transaction lost its lease before the commit")

// Backend is a handle on a store in memory. It is safe for concurrent use.
type Backend struct {
	s      *store
	closed atomic.Bool
}

var (
	namedMu sync.Mutex
	named   = map[string]*store{}
)

// New returns a backend on a new, empty store of its own.
func New() *Backend { return &Backend{s: newStore()} }

// Named returns a backend on the store called name, created on first use;
// every backend of one name in the process shares the store.
func Named(name string) *Backend {
	namedMu.Lock()
	defer namedMu.Unlock()
	s, ok := named[name]
	if !ok {
		s = newStore()
		named[name] = s
	}
	return &Backend{s: s}
}

// Reopen returns another handle on b's store, as a second connection to one
// database would be.
func (b *Backend) Reopen() *Backend { return &Backend{s: b.s} }

// Name implements backend.Backend.
func (b *Backend) Name() string { return "memory" }

// Close implements backend.Backend. The store stays for other handles.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

var errClosed = errors.New("memory backend is closed")

func (b *Backend) check() error {
	if b.closed.Load() {
		return errClosed
	}
	return nil
}
