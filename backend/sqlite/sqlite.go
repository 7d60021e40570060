// Package sqlite is Spool's embedded backend: a single SQLite file, with
// nothing to install. It is the default store of the spool CLI and suits
// development, tests and single-machine applications.
//
// The file is in WAL mode, so readers never block the writer. Every write
// transaction begins IMMEDIATE (it takes the write lock first, so it can never
// fail half-way with a lock upgrade), and within a process all writes go
// through one connection per file, handed out first come, first served:
// Spool's own goroutines never contend for the lock through SQLite. Other
// processes writing the same file are waited for with a fair busy handler: a
// retry every millisecond until a timeout, instead of SQLite's growing
// back-off, which starves the waiters that arrived first (see
// docs/sqlite.md). Time during which one connection held the write lock and
// nobody else could write (a process paused inside a write transaction) is
// credited to running leases, so that it does not cost healthy workers their
// jobs (stall.go).
//
// The store's clock is the host's clock: every process that shares a SQLite
// file runs on the same machine. Times are stored as integer microseconds
// since the Unix epoch, UTC.
//
// Jobs inserted by this process wake its producers at once; commits of
// other processes are noticed within about 20 ms (PRAGMA data_version).
//
// Transactions passed as backend.Tx must be a *sql.Tx on the same file
// (DB returns the backend's own writer pool, the best choice; see its doc).
//
// The driver is modernc.org/sqlite, a pure-Go SQLite: no cgo, no C compiler.
// The choice and the figures behind it are in docs/sqlite.md.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// URL query parameters read by Open.
const (
	// BusyParam selects the busy handler: "fair" (the default) or "backoff"
	// (SQLite's own).
	BusyParam = "spool_busy"
	// BusyTimeoutParam sets Options.BusyTimeout, as a Go duration ("5s").
	BusyTimeoutParam = "spool_busy_timeout"
	// SynchronousParam sets Options.Synchronous: "full" or "normal".
	SynchronousParam = "spool_synchronous"
)

// Busy handler modes.
const (
	// BusyFair retries the write lock every millisecond until the timeout:
	// waiters are served about in arrival order. The default.
	BusyFair = "fair"
	// BusyBackoff retries after sleeps that grow from 1 ms to 100 ms, as
	// SQLite's built-in busy handler's do (taken in Go, so that a
	// cancelled context ends them): late arrivals can overtake early ones.
	// For comparison (the lab's contention experiment, go run ./bench/lab
	// contention).
	BusyBackoff = "backoff"
)

// Synchronous modes (PRAGMA synchronous in WAL mode).
const (
	// SynchronousFull syncs the WAL at every commit: a committed job
	// survives a power loss. The default.
	SynchronousFull = "full"
	// SynchronousNormal syncs at checkpoints only: a committed job survives
	// a process crash, but the last commits may roll back after a power loss
	// or an operating system crash.
	SynchronousNormal = "normal"
)

// DefaultBusyTimeout is how long a write waits for another process's write
// lock before it fails.
const DefaultBusyTimeout = 5 * time.Second

// ErrBusy is returned, wrapped, when the write lock stayed held by another
// connection for the whole busy timeout.
var ErrBusy = errors.New("database is locked by another connection")

// ErrInvalidPath is returned, wrapped, for a database path that cannot hold a
// SQLite database (missing or read-only directory, not a regular file).
var ErrInvalidPath = errors.New("invalid database path")

// ErrNotDatabase is returned, wrapped, when the file exists but is not a
// SQLite database.
var ErrNotDatabase = errors.New("file is not a SQLite database")

// Options configure the backend.
type Options struct {
	// Busy is BusyFair (default) or BusyBackoff.
	Busy string
	// BusyTimeout bounds the wait for another process's write lock.
	// Defaults to DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Synchronous is SynchronousFull (default) or SynchronousNormal.
	Synchronous string
	// Readers is the number of read connections. Defaults to 4.
	Readers int
	// Separate opens connections of the backend's own even when this process
	// already has the file open, as another process would. By default every
	// backend of a process on one file shares one writer connection, so
	// they never wait for each other through SQLite's locks, and shares
	// in-process wake-ups.
	Separate bool
}

// Backend is the SQLite implementation of backend.Backend.
type Backend struct {
	st        *store
	closeOnce sync.Once
	closeErr  error
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Notifier = (*Backend)(nil)
)

// Open opens (creating it if needed) the SQLite database at PATH in a
// sqlite://PATH URL: sqlite:///abs/path.db, sqlite://relative/path.db or
// sqlite://./file.db. The query parameters spool_busy, spool_busy_timeout
// and spool_synchronous set Options. The directory must exist and be
// writable.
func Open(ctx context.Context, dsn string) (*Backend, error) {
	path, opts, err := ParseURL(dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	return OpenPath(ctx, path, opts)
}

// ParseURL splits a sqlite:// URL into a file path and options.
func ParseURL(dsn string) (string, *Options, error) {
	rest, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok {
		return "", nil, fmt.Errorf("%w: %q does not start with sqlite://", ErrInvalidPath, dsn)
	}
	rawPath, rawQuery, _ := strings.Cut(rest, "?")
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %q: %v", ErrInvalidPath, rawPath, err)
	}
	if path == "" {
		return "", nil, fmt.Errorf("%w: no path in %q (want sqlite://PATH)", ErrInvalidPath, dsn)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("parse query of %q: %w", dsn, err)
	}
	opts := &Options{}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case BusyParam:
			opts.Busy = v
		case BusyTimeoutParam:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return "", nil, fmt.Errorf("%s=%q: want a positive duration such as 5s", BusyTimeoutParam, v)
			}
			opts.BusyTimeout = d
		case SynchronousParam:
			opts.Synchronous = v
		default:
			return "", nil, fmt.Errorf("unknown parameter %q in sqlite URL (known: %s, %s, %s)", k, BusyParam, BusyTimeoutParam, SynchronousParam)
		}
	}
	return path, opts, nil
}

// OpenPath opens (creating it if needed) the SQLite database at path.
func OpenPath(ctx context.Context, path string, opts *Options) (*Backend, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	switch o.Busy {
	case "":
		o.Busy = BusyFair
	case BusyFair, BusyBackoff:
	default:
		return nil, fmt.Errorf("open sqlite: busy handler %q (want %s or %s)", o.Busy, BusyFair, BusyBackoff)
	}
	switch o.Synchronous {
	case "":
		o.Synchronous = SynchronousFull
	case SynchronousFull, SynchronousNormal:
	default:
		return nil, fmt.Errorf("open sqlite: synchronous %q (want %s or %s)", o.Synchronous, SynchronousFull, SynchronousNormal)
	}
	if o.BusyTimeout < 0 {
		return nil, fmt.Errorf("open sqlite: negative busy timeout %s", o.BusyTimeout)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.Readers < 0 || o.Readers > 64 {
		return nil, fmt.Errorf("open sqlite: readers %d is out of range 0..64", o.Readers)
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	st, err := acquireStore(ctx, path, &o)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &Backend{st: st}, nil
}

func init() {
	backend.Register(func(ctx context.Context, dsn string) (backend.Backend, error) {
		return Open(ctx, dsn)
	}, "sqlite")
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "sqlite" }

// Path returns the absolute path of the database file.
func (b *Backend) Path() string { return b.st.path }

// WriteTx runs fn in a write transaction on the file and commits it when fn
// returns nil (and rolls it back otherwise). It is the best way for an
// application to write in the same transaction as Spool (InsertTx,
// CompleteTx): it takes its turn behind this process's other writes in
// arrival order, begins IMMEDIATE, and waits for other processes' writes
// with the backend's busy handler. Inside fn, use only tx: a Spool call
// without it would wait for fn's own transaction.
//
// While fn runs nobody else can write the file: every process's claims,
// completions and heartbeats wait for it (other processes' fail with ErrBusy
// after their busy timeout). When fn held the lock long enough to matter,
// the hold is credited to running leases as it commits, so it does not cost
// workers their jobs (docs/sqlite.md); it still stops all progress, so keep
// fn short.
func (b *Backend) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := b.st.writeTx(ctx, fn); err != nil {
		return fmt.Errorf("sqlite write transaction: %w", err)
	}
	return nil
}

// DB returns the backend's writer pool: one connection, on which Spool runs
// all of this process's writes to the file. Transactions begun on it
// (BeginTx) start IMMEDIATE and suit InsertTx and CompleteTx. The connection
// has no busy timeout (Spool waits for other processes' locks itself,
// fairly), so BeginTx fails at once with "database is locked" while another
// process writes; WriteTx waits. While a transaction begun here is open,
// Spool's own writes in this process wait for it, so keep it short and
// never wait, inside it, for Spool work outside it (a plain Insert, a job's
// completion): that would wait for itself until its context ends.
// A *sql.Tx of another pool on the same file works too; it then waits for
// Spool's writes with that pool's busy settings. Unlike WriteTx, a
// transaction begun here is not measured by this process: only other
// processes, which wait for it, credit its hold to running leases.
func (b *Backend) DB() *sql.DB { return b.st.writer }

// Close releases the backend; the file's connections close with the last
// backend of the process that uses them.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.closeErr = releaseStore(b.st) })
	return b.closeErr
}

// txOf returns the caller's transaction, or nil for the backend's own.
func txOf(tx backend.Tx) (*sql.Tx, error) {
	switch t := tx.(type) {
	case nil:
		return nil, nil
	case *sql.Tx:
		if t == nil {
			return nil, nil
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: %T (want *sql.Tx)", backend.ErrTxType, tx)
}
