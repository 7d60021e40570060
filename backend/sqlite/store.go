package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/wakehub"
)

// store is one SQLite file as this process uses it: a writer pool of one
// connection, a pool of read-only connections, the write token that orders
// this process's writers, and the hub of in-process wake-ups. Backends on
// the same file share one store unless Options.Separate is set.
type store struct {
	path    string
	key     string // registry key; empty for a separate store
	writer  *sql.DB
	readers *sql.DB
	// token is the write token: a buffered channel of capacity one. Goroutines
	// blocked on a channel are served in arrival order, so writers of this
	// process take the write lock first come, first served.
	token chan struct{}
	// busyWaits counts the attempts at the write lock that found it held
	// by another connection (the fair handler's; SQLite's own handler
	// waits inside BEGIN, uncounted): tests wait on it for a writer to be
	// waiting.
	busyWaits atomic.Int64
	// returnIDs counts the plain-completion calls still to apply their
	// chunks by the statements returning ids (completes.run) since a
	// counted one fell short.
	returnIDs   atomic.Int32
	busy        string
	busyTimeout time.Duration
	hub         *wakehub.Hub
	refs        int // guarded by storesMu

	// stall is what this process has seen of write-lock stalls not yet
	// credited to running leases (stall.go); guarded by the token.
	stall stallState
	// shortestLease is the shortest lease, in nanoseconds, this process
	// has claimed or extended jobs with; 0 until the first.
	shortestLease atomic.Int64

	// stmts are the writer pool's prepared statements (prepared.go).
	stmts preparedStmts

	watchOnce sync.Once
	watchStop chan struct{} // closed by close to end the watcher
	watchDone chan struct{} // closed when the watcher has returned
}

var (
	storesMu sync.Mutex
	stores   = map[string]*store{}
)

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// acquireStore returns the process's store for path, opening it if needed.
func acquireStore(ctx context.Context, path string, o *Options) (*store, error) {
	abs, err := checkPath(path)
	if err != nil {
		return nil, err
	}
	key := abs + "\x00" + o.Busy + "\x00" + o.Synchronous + "\x00" + o.BusyTimeout.String()
	if !o.Separate {
		storesMu.Lock()
		defer storesMu.Unlock()
		if st, ok := stores[key]; ok {
			st.refs++
			return st, nil
		}
	}
	st, err := openStore(ctx, abs, o)
	if err != nil {
		return nil, err
	}
	st.refs = 1
	if !o.Separate {
		st.key = key
		stores[key] = st
	}
	return st, nil
}

// releaseStore drops one reference and closes the store with the last.
func releaseStore(st *store) error {
	storesMu.Lock()
	st.refs--
	last := st.refs == 0
	if last && st.key != "" {
		delete(stores, st.key)
	}
	storesMu.Unlock()
	if !last {
		return nil
	}
	close(st.watchStop)
	st.watchOnce.Do(func() { close(st.watchDone) }) // never started
	<-st.watchDone
	return errors.Join(st.stmts.closeStmts(), st.readers.Close(), st.writer.Close())
}

// watchInterval is how often the watcher looks for other connections'
// commits.
const watchInterval = 20 * time.Millisecond

// startWatcher starts, once, the goroutine that finds commits made by other
// connections to the file (other processes, above all) and wakes every
// listener's producers, so jobs inserted elsewhere start within about
// watchInterval instead of a poll. It reads PRAGMA data_version on the
// writer connection, which changes only when another connection commits,
// and only when the write token is free (a busy writer means this process
// is working anyway).
//
// It also delivers other processes' cancellations of running jobs: after a
// change, and at least every cancelCheckInterval (a busy writer hides
// changes from it), it reads the cancellation events recorded since its
// last look and wakes listeners with each job's id.
func (st *store) startWatcher() {
	st.watchOnce.Do(func() {
		// The first readings are taken before Listen reports ready, so a
		// commit made after that is seen as a change, and a cancellation as
		// new.
		last, _ := st.dataVersion(true)
		events := st.newCancelEvents()
		go func() {
			defer close(st.watchDone)
			ticker := time.NewTicker(watchInterval)
			defer ticker.Stop()
			for {
				select {
				case <-st.watchStop:
					return
				case <-ticker.C:
				}
				v, ok := st.dataVersion(false)
				changed := ok && last >= 0 && v != last
				if changed {
					st.hub.Publish(backend.Wake{})
				}
				if ok {
					last = v
				}
				if changed || time.Since(events.checked) >= cancelCheckInterval {
					events.deliver()
				}
			}
		}()
	})
}

// cancelCheckInterval bounds how long the watcher goes without reading
// cancellation events when it sees no change.
const cancelCheckInterval = 250 * time.Millisecond

// cancelEvents reads the cancellation events other connections recorded.
type cancelEvents struct {
	st      *store
	lastSeq int64
	ok      bool // lastSeq was read: until then, nothing is delivered
	checked time.Time
}

func (st *store) newCancelEvents() *cancelEvents {
	e := &cancelEvents{st: st}
	e.ok = st.readers.QueryRow(stmt.cancelEventsLast).Scan(&e.lastSeq) == nil
	e.checked = time.Now()
	return e
}

// deliver wakes listeners with the jobs cancelled since the last look. A
// failed read is tried again at the next look; the holders' heartbeats
// cover the meantime.
func (e *cancelEvents) deliver() {
	e.checked = time.Now()
	if !e.ok {
		e.ok = e.st.readers.QueryRow(stmt.cancelEventsLast).Scan(&e.lastSeq) == nil
		return
	}
	rows, err := e.st.readers.Query(stmt.cancelEventsSince, e.lastSeq)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var seq, id int64
		if rows.Scan(&seq, &id) != nil {
			return
		}
		e.lastSeq = seq
		e.st.hub.Publish(backend.Wake{CancelledID: id})
	}
}

// dataVersion reads PRAGMA data_version on the writer connection, holding
// the write token: waiting for it when wait is set, else giving up when a
// write is under way. It returns -1 and false when it read nothing.
func (st *store) dataVersion(wait bool) (int64, bool) {
	if wait {
		st.token <- struct{}{}
	} else {
		select {
		case st.token <- struct{}{}:
		default:
			return -1, false
		}
	}
	defer func() { <-st.token }()
	var v int64
	ctx, cancel := context.WithTimeout(context.Background(), watchInterval)
	defer cancel()
	at := time.Now()
	// Fails when the connection is in a caller's transaction (DB): skip.
	if err := st.writer.QueryRowContext(ctx, stmt.dataVersion).Scan(&v); err != nil {
		return -1, false
	}
	st.noteVersion(v, at)
	return v, true
}

// checkPath resolves path and checks, before SQLite touches anything, that it
// can hold a database this process may write: the directory exists and is
// writable (WAL mode creates PATH-wal and PATH-shm beside the file), and an
// existing file is a regular, writable SQLite file (or empty).
func checkPath(path string) (string, error) {
	if strings.ContainsAny(path, "?\x00") {
		return "", fmt.Errorf("%w: %q contains '?' or NUL", ErrInvalidPath, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidPath, path, err)
	}
	dir := filepath.Dir(abs)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: directory %s does not exist", ErrInvalidPath, dir)
	case err != nil:
		return "", fmt.Errorf("%w: directory %s: %v", ErrInvalidPath, dir, err)
	case !fi.IsDir():
		return "", fmt.Errorf("%w: %s is not a directory", ErrInvalidPath, dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return "", fmt.Errorf("%w: directory %s is not writable (SQLite keeps its -wal and -shm files beside the database): %v", ErrInvalidPath, dir, err)
	}
	fi, err = os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalidPath, abs, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrInvalidPath, abs)
	}
	if err := unix.Access(abs, unix.R_OK|unix.W_OK); err != nil {
		return "", fmt.Errorf("%w: %s is not writable: %v", ErrInvalidPath, abs, err)
	}
	if fi.Size() == 0 {
		return abs, nil
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalidPath, abs, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return "", fmt.Errorf("%w: %s", ErrNotDatabase, abs)
	}
	return abs, nil
}

// openStore opens the writer and reader pools on abs. When it created the
// file and then fails, it removes what it created.
func openStore(ctx context.Context, abs string, o *Options) (st *store, err error) {
	_, statErr := os.Stat(abs)
	created := errors.Is(statErr, fs.ErrNotExist)
	defer func() {
		if err != nil && created {
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				_ = os.Remove(abs + suffix)
			}
		}
	}()

	// Spool retries BEGIN IMMEDIATE itself, in either busy mode (writeTx),
	// so that a cancelled context ends the wait.
	writer, err := openPool(abs, poolSettings{immediate: true, synchronous: o.Synchronous})
	if err != nil {
		return nil, classifyOpenError(abs, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	st = &store{
		path:        abs,
		writer:      writer,
		token:       make(chan struct{}, 1),
		busy:        o.Busy,
		busyTimeout: o.BusyTimeout,
		hub:         wakehub.New(),
		watchStop:   make(chan struct{}),
		watchDone:   make(chan struct{}),
	}
	// The first connection switches the file to WAL (a write, so it may wait
	// for another process like any writer).
	if err := st.pingWriter(ctx); err != nil {
		_ = writer.Close()
		return nil, classifyOpenError(abs, err)
	}
	// Readers never take the write lock, and in WAL mode they do not wait
	// for writers; the busy timeout covers the rare wait for a checkpoint's
	// or recovery's brief lock.
	readers, err := openPool(abs, poolSettings{busyMS: int(o.BusyTimeout / time.Millisecond), queryOnly: true, synchronous: o.Synchronous})
	if err != nil {
		_ = writer.Close()
		return nil, classifyOpenError(abs, err)
	}
	readers.SetMaxOpenConns(o.Readers)
	readers.SetMaxIdleConns(o.Readers)
	st.readers = readers
	if err := readers.PingContext(ctx); err != nil {
		_ = readers.Close()
		_ = writer.Close()
		return nil, classifyOpenError(abs, err)
	}
	return st, nil
}

// pingWriter opens the writer connection (which applies its pragmas,
// journal_mode among them), retrying fairly while another process holds a
// lock the switch needs.
func (st *store) pingWriter(ctx context.Context) error {
	deadline := time.Now().Add(st.busyTimeout)
	for {
		err := st.writer.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// classifyOpenError turns SQLite's open errors into the package's typed ones.
func classifyOpenError(abs string, err error) error {
	switch sqliteCode(err) {
	case codeNotADB:
		return fmt.Errorf("%w: %s", ErrNotDatabase, abs)
	case codeCantOpen, codeReadOnly, codePerm:
		return fmt.Errorf("%w: %s: %v", ErrInvalidPath, abs, err)
	}
	return err
}
