package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// A stall is a span during which one connection held the file's write lock
// and nobody else could write: not a heartbeat, not a completion. A process
// stopped inside a write transaction (SIGSTOP, a frozen VM, a long pause)
// stalls every process on the file for as long as it is stopped. Without a
// correction, the leases of every healthy worker run out during the stall and
// the first rescue after it takes their jobs away: heartbeats that could not
// be written would be judged as missed.
//
// So the time a stall lasted is credited to every running lease: in the
// first write transaction after it, before anything else that transaction
// does (a rescue above all), leased_until moves later by the stall's length.
// The credit is idempotent across processes: spool_stall.credited_until is
// the instant up to which stalls have been credited, and a window is
// credited only past it. Two ways to see a stall:
//
//   - The holder: a write transaction of this process that held the lock at
//     least stallThreshold credits its own hold, in the same transaction,
//     just before it commits; if it rolls back (or was paused in the commit
//     itself), the hold is kept and credited by the next write of this
//     process, which is first in line for the lock.
//   - The waiters: the fair busy handler retries BEGIN IMMEDIATE every
//     millisecond; after each busy attempt it reads PRAGMA data_version,
//     which changes when another connection commits. Busy attempts with no
//     commit between them, and no gap longer than the busy timeout, form one
//     window during which the lock stayed taken; a window of at least
//     stallThreshold is credited by this process's next write transaction
//     as soon as it gets the lock. This covers holders that are not Spool
//     (the sqlite3 shell, an application's own pool).
//
// A waiter sees a stall only from its first busy attempt, which may come
// well after the lock was taken (a rescue runs every third of a lease).
// Crediting from there would give a lease only the part of the stall its
// rescuer happened to see, and a rescuer a few hundred milliseconds late
// (a loaded CPU) leaves healthy short leases ending before their holders'
// first heartbeat after the stall. So a waiter's window is credited from
// the last instant this process knew the lock to be free (its own last
// release, or the last read of data_version before another connection's
// commit), at most stallLookback before its first busy attempt. That
// instant precedes the stall, so the credit covers all of it; it can
// exceed the stall by the quiet time before it, which while any healthy
// lease runs is at most a heartbeat interval (heartbeats commit), and
// never by more than stallLookback.
//
// A process paused while not holding the lock is not a stall: others keep
// writing, nobody's busy window grows, and its leases run out and its jobs
// are rescued as usual. A worker that dies during a stall has its leases
// extended by the stall too, so its jobs are rescued one lease after the
// stall instead of at once when it ends: they are never protected longer
// than the stall lasted, plus, for a holder seen only by its waiters, the
// quiet time credited before it. Every process sharing a SQLite file runs
// on one machine, so all use one clock.
//
// On the normal path this costs nothing: a comparison of two times per
// transaction; SQL runs only after a stall of at least stallThreshold.

// stallWindow is a span during which this process could not write the file:
// it saw the lock taken from from to to, and the lock may have been taken
// as early as since (since <= from).
type stallWindow struct{ since, from, to time.Time }

// len is how long the window was seen, which decides whether it is credited.
func (w stallWindow) len() time.Duration { return w.to.Sub(w.from) }

// held returns a window of this process's own hold of the lock.
func held(from, to time.Time) stallWindow { return stallWindow{since: from, from: from, to: to} }

// stallLookback bounds how far before its first busy attempt a waiter's
// window is credited from.
const stallLookback = time.Second

// stallState is what this process has seen of stalls not credited yet. It is
// guarded by the write token: only the holder of the token touches it.
type stallState struct {
	// busy is the open window of busy attempts; from is zero when none.
	busy stallWindow
	// closed are finished windows of at least the threshold, waiting for
	// this process's next write transaction.
	closed []stallWindow

	// read is set once data_version has been read on the writer
	// connection; version is the last value read, begun at readAt.
	read    bool
	version int64
	readAt  time.Time
	// freeAt is the latest instant the write lock is known to have been
	// free: this process's last release of it, or the last read of
	// data_version before another connection's commit. A stall seen later
	// began after it.
	freeAt time.Time
}

// maxClosedStalls bounds the windows kept between two writes; beyond it the
// oldest are merged (a wider window: a little more credit, never less).
const maxClosedStalls = 32

// stallThresholdMax is the threshold when no lease is known, and its cap.
const stallThresholdMax = time.Second

// stallThreshold is the shortest stall credited: a quarter of the shortest
// lease this process has claimed or extended jobs with (a lease has two
// thirds of its length to spare between heartbeats), at most a second.
func (st *store) stallThreshold() time.Duration {
	if l := time.Duration(st.shortestLease.Load()); l > 0 {
		return min(stallThresholdMax, l/4)
	}
	return stallThresholdMax
}

// noteLease records a lease length used by this process.
func (st *store) noteLease(d time.Duration) {
	if d <= 0 {
		return
	}
	for {
		cur := st.shortestLease.Load()
		if cur != 0 && cur <= int64(d) {
			return
		}
		if st.shortestLease.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// noteBusy records a busy attempt at t: it extends the open window when no
// other connection has committed since the window's last attempt, and
// otherwise closes it and opens a new one. The caller holds the token and
// no transaction on the writer connection.
func (st *store) noteBusy(ctx context.Context, t time.Time) {
	s := &st.stall
	// A read transaction, which never waits for the write lock in WAL mode.
	// It is read even when ctx has just ended, so the window stays whole,
	// but never waits long: an application transaction begun on DB() in
	// the meantime would hold the connection.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchInterval)
	at := time.Now()
	var v int64
	err := st.writer.QueryRowContext(rctx, stmt.dataVersion).Scan(&v)
	cancel()
	open := !s.busy.from.IsZero() && t.Sub(s.busy.to) <= st.busyTimeout
	if err != nil {
		// Unknown (a loaded machine can take longer than the read's
		// deadline): the open window stays as it is, and the next read
		// that finds the same version proves no commit in between.
		return
	}
	if open && s.read && v == s.version {
		s.busy.to = t
		st.noteVersion(v, at)
		return
	}
	st.closeBusy()
	s.busy = stallWindow{since: st.lockFreeBefore(t, v), from: t, to: t}
	st.noteVersion(v, at)
}

// noteVersion records that data_version read v, in a read begun at at. A
// change means another connection committed after the previous read, and
// so held and released the lock after it.
func (st *store) noteVersion(v int64, at time.Time) {
	s := &st.stall
	if s.read && v != s.version {
		s.freeAt = maxTime(s.freeAt, s.readAt)
	}
	s.read, s.version, s.readAt = true, v, at
}

// noteFree records that this process released the write lock after t.
func (st *store) noteFree(t time.Time) {
	s := &st.stall
	s.freeAt = maxTime(s.freeAt, t)
}

// lockFreeBefore returns an instant before which the lock, found taken at t
// by a read of data_version that gave v (not yet recorded), was free: the
// stall began after it. It is at most stallLookback before t.
func (st *store) lockFreeBefore(t time.Time, v int64) time.Time {
	s := &st.stall
	free := t
	switch {
	case !s.read:
	case v == s.version:
		free = s.freeAt // no commit since the last read
	default:
		free = s.readAt // a commit since the last read
	}
	if free.After(t) {
		return t
	}
	return maxTime(free, t.Add(-stallLookback))
}

// closeBusy moves the open busy window, if long enough, to the closed ones.
func (st *store) closeBusy() {
	s := &st.stall
	if !s.busy.from.IsZero() {
		st.noteStall(s.busy)
	}
	s.busy = stallWindow{}
}

// noteStall keeps w for the next write transaction when it is long enough.
func (st *store) noteStall(w stallWindow) {
	if w.len() < st.stallThreshold() {
		return
	}
	s := &st.stall
	s.closed = append(s.closed, w)
	if len(s.closed) > maxClosedStalls {
		slices.SortFunc(s.closed, func(a, b stallWindow) int { return a.since.Compare(b.since) })
		a, b := s.closed[0], s.closed[1]
		s.closed[1] = stallWindow{since: a.since, from: a.from, to: maxTime(a.to, b.to)}
		s.closed = s.closed[1:]
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// creditSeenStalls credits, in tx (just begun), every stall this process has
// seen and not credited, oldest first, and forgets them.
func (st *store) creditSeenStalls(ctx context.Context, tx *sql.Tx) error {
	st.closeBusy()
	s := &st.stall
	if len(s.closed) == 0 {
		return nil
	}
	ws := s.closed
	s.closed = nil
	slices.SortFunc(ws, func(a, b stallWindow) int { return a.since.Compare(b.since) })
	for _, w := range ws {
		if err := creditStall(ctx, tx, w); err != nil {
			return err
		}
	}
	return nil
}

// creditStall adds the part of w (from since) not credited yet to every
// lease that was running when that part began, and moves credited_until to
// w's end. A lease that had ended before stays ended: it was rescuable then.
func creditStall(ctx context.Context, tx *sql.Tx, w stallWindow) error {
	var credited int64
	if err := tx.QueryRowContext(ctx, stmt.stallCredited).Scan(&credited); err != nil {
		// A file not migrated to version 2 has no table to credit into
		// (Migrate's own transaction before it creates it, above all).
		var n int
		if e := tx.QueryRowContext(ctx, stmt.stallTableExists).Scan(&n); e == nil && n == 0 {
			return nil
		}
		return fmt.Errorf("credit a write-lock stall of %s to running leases: read spool_stall: %w", w.len().Round(time.Millisecond), err)
	}
	from, to := max(w.since.UnixMicro(), credited), w.to.UnixMicro()
	if to <= from {
		return nil
	}
	if _, err := tx.ExecContext(ctx, stmt.stallCreditLeases, to-from, from); err != nil {
		return fmt.Errorf("credit a write-lock stall of %s to running leases: %w", w.len().Round(time.Millisecond), err)
	}
	if _, err := tx.ExecContext(ctx, stmt.stallCredit, to); err != nil {
		return fmt.Errorf("credit a write-lock stall of %s to running leases: %w", w.len().Round(time.Millisecond), err)
	}
	return nil
}

// CreditsStalls implements backend.StallCrediter: a stall is credited to
// every running lease, so a lease outlasts what its holder saw of it.
func (b *Backend) CreditsStalls() bool { return true }
