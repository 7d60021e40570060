package postgres

import (
	"context"
	"sync"
	"time"
)

// Wake-up modes, as set in Options.Wake or the spool_wake URL parameter:
// how this backend's inserts outside a caller's transaction wake workers.
const (
	// WakeAfterCommit announces the jobs after the inserting transaction
	// commits, in a transaction of its own that one statement sends for
	// every insert committed meanwhile. The default. A lone job inserted
	// while no other insert of the backend is in flight, with no WakeGap,
	// is announced by its own transaction instead (insert_wake_now.sql).
	WakeAfterCommit = "after"
	// WakeAtCommit notifies in the inserting transaction, as inserts in a
	// caller's transaction always do: each notifying commit then waits for
	// the one before it (PostgreSQL's notification lock is held across the
	// commit's WAL flush).
	WakeAtCommit = "commit"
	// WakeOff sends no wake-up for these inserts: workers find their jobs
	// by polling.
	WakeOff = "off"
)

// WakeParam is the URL query parameter that sets Options.Wake in Open.
const WakeParam = "spool_wake"

// WakeGapParam is the URL query parameter that sets Options.WakeGap in
// Open, as a Go duration ("2ms").
const WakeGapParam = "spool_wake_gap"

// MaxWakeGap bounds Options.WakeGap: a longer gap would hold wake-ups back
// for about as long as workers poll.
const MaxWakeGap = time.Second

// queueKeys holds, by queue, the lowest claim key of the jobs a wake-up
// announces, and their ids when each was noted with its id.
type queueKeys map[string]wakeKey

// wakeKey is one queue's part of a wake-up: the lowest claim key, and
// the ids of every job announced, nil when not listed (a key noted without
// its job's id, or more than maxNoticeIDs jobs).
type wakeKey struct {
	key claimKey
	ids []int64
}

// maxNoticeIDs bounds the ids a notification lists (PostgreSQL's payloads
// stop at 8,000 bytes); a wake-up for more lists none.
const maxNoticeIDs = 64

// note keeps k if it is below every key of its queue so far, making the
// map on first use. The queue's jobs become unlisted: the callers that
// note a key without an id (a release, a rescue, a workflow's step) may
// announce several jobs under it.
func (m *queueKeys) note(queue string, k claimKey) {
	m.merge(queue, wakeKey{key: k})
}

// noteJob is note for one inserted job, listed by its id (k.id).
func (m *queueKeys) noteJob(queue string, k claimKey) {
	m.merge(queue, wakeKey{key: k, ids: []int64{k.id}})
}

// merge adds w to queue's part: the lower key, and the ids of both while
// both list theirs and they fit in a notification.
func (m *queueKeys) merge(queue string, w wakeKey) {
	if *m == nil {
		*m = queueKeys{}
	}
	cur, ok := (*m)[queue]
	if !ok {
		(*m)[queue] = w
		return
	}
	if w.key.less(cur.key) {
		cur.key = w.key
	}
	if cur.ids == nil || w.ids == nil || len(cur.ids)+len(w.ids) > maxNoticeIDs {
		cur.ids = nil
	} else {
		cur.ids = append(cur.ids[:len(cur.ids):len(cur.ids)], w.ids...)
	}
	(*m)[queue] = cur
}

// waker announces jobs after their commit. An insert hands it the lowest
// claim key it committed in each queue; the waker sends one notification
// per queue for everything handed to it since its last send, in one
// statement and its own transaction. That transaction writes only its
// commit record (NOTIFY gives it a transaction id), which PostgreSQL does
// not wait to flush, since nothing before it was WAL-logged. So its commit
// adds no flush to a job and holds the notification lock only briefly,
// and notifying inserts no longer commit one at a time (pgbench, 16
// clients, one insert a transaction: 3,500/s notifying in the transaction,
// 13,500 to 14,100/s notifying afterwards once in ten, 14,500/s never).
// A wake-up lost with its connection or its process leaves the job to the
// workers' poll and the claim floors' probe, as a lost notification always
// did.
type waker struct {
	b       *Backend
	gap     time.Duration // Options.WakeGap
	mu      sync.Mutex
	pending queueKeys     // the lowest key committed per queue
	kick    chan struct{} // buffered 1: pending has entries
	done    chan struct{} // closed when run returns
}

func newWaker(b *Backend, gap time.Duration) *waker {
	return &waker{b: b, gap: gap, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// add records committed jobs' lowest keys by queue, to be announced.
func (w *waker) add(keys queueKeys) {
	if len(keys) == 0 {
		return
	}
	w.mu.Lock()
	for q, k := range keys {
		w.pending.merge(q, k)
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// take returns and clears what is pending.
func (w *waker) take() queueKeys {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	p := w.pending
	w.pending = nil
	return p
}

// run sends what is pending until ctx ends, then what is left, within a
// few seconds (Close: a command that inserts and exits still wakes). A send
// within the gap of the one before waits out the gap first, gathering what
// commits meanwhile.
func (w *waker) run(ctx context.Context) {
	defer close(w.done)
	var sent time.Time
	var gap *time.Timer
	for {
		select {
		case <-w.kick:
			if wait := time.Until(sent.Add(w.gap)); wait > 0 {
				if gap == nil {
					gap = time.NewTimer(wait)
				} else {
					gap.Reset(wait)
				}
				select {
				case <-gap.C:
				case <-ctx.Done():
					gap.Stop()
					w.sendLast()
					return
				}
			}
			sent = time.Now()
			w.send(ctx, w.take())
		case <-ctx.Done():
			w.sendLast()
			return
		}
	}
}

// sendLast sends what is pending once the backend is closing.
func (w *waker) sendLast() {
	last, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.send(last, w.take())
}

// send notifies each queue once with its lowest key, in the format of the
// insert trigger (parseInsertNotice).
func (w *waker) send(ctx context.Context, keys queueKeys) {
	if len(keys) == 0 {
		return
	}
	// An error loses only the wake-up: the jobs are committed, and workers
	// find them by their poll.
	_, _ = w.b.pool.Exec(ctx, notifySQL, w.b.channel, duePayloads(keys))
}
