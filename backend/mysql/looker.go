package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The looker (Options.WakeRouting looker, schema 18). While jobs come, the
// process that holds the looker's lease reads the new ids every
// newJobsInterval and claims for them itself; the others read the heads
// (notes, cancellations, paused queues and the lease) every lookerWatch
// when the holder has no idle worker, every lookerBusyWatch when it has
// one, and no new ids. A process takes the lease when it has lapsed (its
// holder stopped renewing it, or gave it up as it stopped), or when its
// heads show ids above the lease's cursor and the holder has no idle
// worker while this process has one (backend.WakeDemand): the process
// that claims for new jobs is one whose workers wait for them.
//
// A holder that has seen no new job for idleAfter keeps the lease, as the
// fleet's one idle looker: it looks every idleJobsInterval, as every
// process did before, and renews the lease every lookerIdleRenew for
// lookerIdleLease. The others, watching a lease whose holder's heads do
// not move, look less and less often, up to every lookerIdleWatch. An
// idle fleet then costs the server about one process's looks and each
// other process's polls, not every process's looks: with 8 processes
// that each looked every idleJobsInterval, the looks were most of the
// server's work (docs/benchmarks/2026-12-01d.md).
const (
	// lookerLease is how long a take or a renewal holds the lease, by the
	// server's clock; the holder renews it every lookerRenew. A holder that
	// stopped is replaced within lookerLease + lookerBusyWatch of its last
	// renewal, and its successor reads on from the lease's cursor.
	lookerLease = 100 * time.Millisecond
	lookerRenew = 30 * time.Millisecond
	// lookerWatch is how often a process that does not hold the lease
	// looks while another holds it and jobs come (the heads' newest id
	// moved since its last look): the bound on how late a process with
	// idle workers takes the lease from a holder without any.
	lookerWatch = 50 * time.Millisecond
	// lookerBusyWatch is how often a process that does not hold the lease
	// looks while jobs come and the holder has an idle worker: such a
	// holder's lease can only lapse, which takes lookerLease after its
	// last renewal, and the heads carry the cancellation events, which
	// a listener hears at least every headsInterval while jobs come. At
	// lookerWatch, 7 watching processes sent 134 reads of the heads per
	// 1,000 jobs at 1,000 jobs a second, 6% of the server's statements
	// and the part of them that grew with the processes
	// (docs/benchmarks/2026-12-02.md, "MariaDB pickup at 1,000 jobs a
	// second").
	lookerBusyWatch = headsInterval
	// An idle holder (no new job for idleAfter) renews the lease every
	// lookerIdleRenew for lookerIdleLease: a durable write a second
	// instead of 33. One that stopped is replaced within lookerIdleLease +
	// lookerIdleWatch; meanwhile the processes' polls (PollInterval) find
	// new jobs. While the heads' newest id stays where it was, a watching
	// process doubles its interval from lookerWatch up to
	// lookerIdleWatch, which bounds how late it hears of a cancellation
	// (its heads) while no job comes.
	lookerIdleLease = 3 * time.Second
	lookerIdleRenew = time.Second
	lookerIdleWatch = 500 * time.Millisecond
	// lookerBacklog bounds how far below the newest id a new holder starts
	// reading: more ids than that are a backlog, which a claim after a
	// wake-up takes without a wake-up per span.
	lookerBacklog = 10 * newJobsBatch
)

// lease is the looker's row as the heads read it.
type lease struct {
	// present: the row exists.
	present bool
	// cursor is the highest job id its holder has read.
	cursor int64
	// slow: the holder had no idle worker at its last renewal. live: the
	// lease has not lapsed. released: the holder gave it up.
	slow, live, released bool
	holder               string
}

// parseLease parses the heads' lease column (listen_heads.sql).
func parseLease(v sql.NullString) (lease, error) {
	if !v.Valid {
		return lease{}, nil
	}
	f := strings.Split(v.String, " ")
	if len(f) < 4 {
		return lease{}, fmt.Errorf("looker's lease %q", v.String)
	}
	cursor, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return lease{}, fmt.Errorf("looker's lease %q: %w", v.String, err)
	}
	l := lease{present: true, cursor: cursor, slow: f[1] == "1", live: f[2] == "1", released: f[3] == "1"}
	if len(f) > 4 {
		l.holder = f[4]
	}
	return l, nil
}

// looker is one Listen call's part in the looker's lease of its set of
// queues. The Listen calls of one Backend hold it under one name, the
// Backend's: when one of them holds it, each reads the new ids for its
// own client.
type looker struct {
	b    *Backend
	name string
	// key is the set of queues whose lease it holds or takes (wakeQueuesKey).
	key string
	// mu orders the lease's statements: a renewal never runs after a
	// release, nor a release while a take is out.
	mu sync.Mutex
	// held: this Listen holds the lease, as far as its last statement
	// said (written under mu).
	held atomic.Bool
	// idle: this Listen has seen no new job for idleAfter; its takes and
	// renewals hold the lease for lookerIdleLease.
	idle atomic.Bool
	// renewedAt is when the lease was last taken or renewed, renewedIdle
	// whether for lookerIdleLease (both under mu).
	renewedAt   time.Time
	renewedIdle bool
	// cursor is the highest job id this Listen has read.
	cursor atomic.Int64
}

// holding reports whether this Listen holds the lease.
func (l *looker) holding() bool { return l.held.Load() }

// wants reports whether this Listen should try to take the lease that h
// shows: a lease that has lapsed, whether or not new ids came (an idle
// fleet keeps one looker); or, when there are new ids above its cursor
// and above seen (the highest id this Listen has seen: those it saw at
// its start are its start's claims'), a lease held by this backend or by
// a holder with no idle worker while this process has one. The cursor of
// a lease this backend holds or held (another Listen of it, for another
// client) counts for nothing: that Listen read those ids for its own
// client.
func (l *looker) wants(h heads, seen int64) bool {
	ls := h.lease
	if !ls.present {
		return false
	}
	if !ls.live {
		return true
	}
	if h.job <= max(l.othersCursor(ls), seen) {
		return false
	}
	return ls.holder == l.name || (ls.slow && l.b.demands.Waiting())
}

// othersCursor is the lease's cursor as ids another process read for
// this backend's queues, 0 when the holder is this backend.
func (l *looker) othersCursor(ls lease) int64 {
	if ls.holder == l.name {
		return 0
	}
	return ls.cursor
}

// leaseFor is how long a take or a renewal holds the lease: lookerLease,
// or lookerIdleLease for an idle holder.
func leaseFor(idle bool) time.Duration {
	if idle {
		return lookerIdleLease
	}
	return lookerLease
}

// hold takes or renews the lease, recording cursor; it reports whether
// this Listen holds it now.
func (l *looker) hold(ctx context.Context, cursor int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	waiting, idle := l.b.demands.Waiting(), l.idle.Load()
	res, err := l.b.db.ExecContext(ctx, l.b.sql.lookerHold, l.name, leaseFor(idle).Microseconds(), cursor, !waiting, l.key, l.name, waiting)
	if err != nil {
		return false, fmt.Errorf("listen: hold the looker's lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("listen: hold the looker's lease: %w", err)
	}
	l.held.Store(n > 0)
	l.renewedAt, l.renewedIdle = time.Now(), idle
	return n > 0, nil
}

// renewDue reports whether the lease is due for a renewal at this tick
// of renew (under mu): at every tick while jobs come, at once when the
// holder went idle or stopped being idle since the last renewal, and
// every lookerIdleRenew while it stays idle.
func (l *looker) renewDue(idle bool) bool {
	return !idle || !l.renewedIdle || time.Since(l.renewedAt) >= lookerIdleRenew
}

// renew renews the lease while this Listen holds it, every lookerRenew
// (every lookerIdleRenew while idle), until ctx ends; a renewal that finds
// the lease taken ends the holding. A renewal that fails is tried again
// at the next tick: the lease lapses meanwhile, and another process takes
// it.
func (l *looker) renew(ctx context.Context) {
	t := time.NewTicker(lookerRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.held.Load() {
			continue
		}
		l.mu.Lock()
		if idle := l.idle.Load(); l.held.Load() && l.renewDue(idle) {
			waiting := l.b.demands.Waiting()
			res, err := l.b.db.ExecContext(ctx, l.b.sql.lookerHold, l.name, leaseFor(idle).Microseconds(), l.cursor.Load(), !waiting, l.key, l.name, false)
			if err == nil {
				if n, err := res.RowsAffected(); err == nil {
					if n == 0 {
						l.held.Store(false)
					}
					l.renewedAt, l.renewedIdle = time.Now(), idle
				}
			}
		}
		l.mu.Unlock()
	}
}

// release gives the lease up, recording the cursor: the next process to
// see a higher id takes it at once.
func (l *looker) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Swap(false) {
		return nil
	}
	if _, err := l.b.db.ExecContext(ctx, l.b.sql.lookerRelease, l.cursor.Load(), l.key, l.name); err != nil {
		return fmt.Errorf("listen: give the looker's lease up: %w", err)
	}
	return nil
}

// drop forgets the lease without a statement: the heads showed another
// holder.
func (l *looker) drop() {
	l.mu.Lock()
	l.held.Store(false)
	l.mu.Unlock()
}

// AddWakeDemand implements backend.WakeDemand: with the looker (Options.
// WakeRouting), a process whose client has an idle worker takes the
// looker's lease from one whose client has none.
func (b *Backend) AddWakeDemand(waiting func() bool) (remove func()) {
	return b.demands.Add(waiting)
}

// AddWakeQueues implements backend.WakeQueues: with the looker (Options.
// WakeRouting), the processes that work the same queues share a lease,
// and those that work others read the new jobs for themselves.
func (b *Backend) AddWakeQueues(queues []string) (remove func()) {
	return b.queueSets.Add(slices.Clone(queues))
}

// wakeQueuesKey names the set of queues registered with AddWakeQueues
// (their union), as spool_looker's set_key: "" when none is registered.
func (b *Backend) wakeQueuesKey() string {
	var all []string
	b.queueSets.Range(func(qs []string) bool {
		all = append(all, qs...)
		return true
	})
	if len(all) == 0 {
		return ""
	}
	slices.Sort(all)
	all = slices.Compact(all)
	h := sha256.New()
	for _, q := range all {
		h.Write([]byte(q))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// setKey is the set of queues whose lease the heads read: "" without the
// looker.
func (l *looker) setKey() string {
	if l == nil {
		return ""
	}
	return l.key
}

// rekey gives the lease up when the queues registered with the Backend
// have changed (a client started or stopped on it), and goes on with the
// lease of the new set.
func (l *looker) rekey(ctx context.Context) error {
	key := l.b.wakeQueuesKey()
	if key == l.key {
		return nil
	}
	if err := l.release(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	l.key = key
	l.mu.Unlock()
	return nil
}
