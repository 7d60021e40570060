package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// Claims of listed jobs. Listen reads the ids of the new jobs (listen.go)
// and wakes their queues; the claim a wake-up sends would then walk the
// claim index from the queue's head. That walk steps over the entries of
// the jobs claimed in the last moments, which InnoDB keeps, delete-marked,
// until its purge removes them, and while jobs stream in the purge lags
// behind the claims, so a small pickup claim read many pages a row
// (BENCHMARKS.md, history, 2026-12-01f: "MariaDB pickup at 1 and 8
// processes: claims of listed jobs by primary key"). A claim
// expected to be small therefore claims the jobs Listen listed for its
// queue by primary key instead (on MariaDB in two round trips and no
// transaction of its own, claimListedNoWait), when it may:
//
//   - the queue's listed ids are at most smallClaimMax (more are a
//     backlog, which a head claim takes whole); a claim that asks for
//     fewer takes the oldest of them by id, and leaves the rest to the
//     next claim, so that the SELECT's LIMIT never leaves a row it
//     locked unreturned;
//   - the queue's last head claim (one that walks the index) began less
//     than listedHeadEvery ago. Jobs no list names wait for a head claim:
//     a job whose insert committed after a higher id was read
//     (AUTO_INCREMENT values can commit out of order), a job released or
//     rescued, a job that came due. So while claims keep coming, the
//     first after that bound walks the head; and a listed claim arms a
//     wake-up of its queue for listedHeadEvery after the queue's last
//     claim, in case no claim comes by itself (recheck).
//
// A claim with no listed id for its queue (a poll's, most often) is a
// head claim. Each listed claim forgets the ids it sent, taken or not: a
// job another claim holds is that claim's, and one that went back to the
// queue since is a head claim's. A list whose every job this backend's
// own claims took (Listen read them after a head claim did) sends no
// claim at all.
const (
	listedHeadEvery = 50 * time.Millisecond
	// listedMax bounds the ids kept for one queue: past it the queue's
	// list is dropped, and its next claim is a head claim (a backlog,
	// which a head claim takes whole).
	listedMax = 1024
)

// listedJobs holds, per queue, the ids of new jobs Listen read that no
// claim of this backend has sent yet.
type listedJobs struct {
	mu     sync.Mutex
	queues map[string]*listedQueue
	// wake wakes a queue's producers (the backend's own hub).
	wake func(queue string)
	// every is listedHeadEvery; now and after are time.Now and
	// time.AfterFunc (the tests' clock replaces them).
	every time.Duration
	now   func() time.Time
	after func(time.Duration, func())
}

// newListedJobs returns the listed jobs of a backend whose wake wakes a
// queue.
func newListedJobs(wake func(queue string)) *listedJobs {
	return &listedJobs{
		wake:  wake,
		every: listedHeadEvery,
		now:   time.Now,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
	}
}

type listedQueue struct {
	ids []int64
	// taken holds the ids of the jobs the queue's last claims in this
	// backend took, at most takenMax: Listen may read a job after a
	// claim took it, committed before that claim's read.
	taken []int64
	// headAt is when the queue's last head claim began, claimAt its
	// last claim of either kind; listedSince whether a listed claim
	// began after headAt. armed: a recheck is armed.
	headAt, claimAt time.Time
	listedSince     bool
	armed           bool
}

// takenMax bounds the ids a queue's taken keeps.
const takenMax = 256

// queue returns the state of a queue, made on first use. mu is held.
func (l *listedJobs) queue(name string) *listedQueue {
	q := l.queues[name]
	if q == nil {
		if l.queues == nil {
			l.queues = map[string]*listedQueue{}
		}
		q = &listedQueue{}
		l.queues[name] = q
	}
	return q
}

// add records new jobs of a queue that Listen read.
func (l *listedJobs) add(queue string, ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queue)
	if len(q.ids)+len(ids) > listedMax {
		q.ids = q.ids[:0]
		return
	}
	q.ids = append(q.ids, ids...)
}

// forClaim decides a small claim of up to n jobs of a queue, beginning
// now. It returns the ids to claim by primary key, forgotten from the
// list; or none for a head claim; or none and skip when every id listed
// was taken by this backend's own claims, so that the claim need not be
// sent (a head claim comes within the bound, listedRecheck). A claim
// asking for fewer jobs than are listed takes the oldest n of them, and
// leaves the rest for the next claim, when the list holds at most
// smallClaimMax ids; a longer one is a backlog, which a head claim takes
// whole. When head is false, the claim has not waited for the queue's
// turn (claimPessimistic), and it is sent only for listed ids: none and
// no skip then mean that it must take the turn and ask again, and the
// head claim's time is not recorded.
func (l *listedJobs) forClaim(queue string, n int, head bool) (ids []int64, skip bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queue)
	fresh := now.Sub(q.headAt) < l.every
	if listed := len(q.ids) > 0; listed && fresh {
		q.ids = slices.DeleteFunc(q.ids, func(id int64) bool { return slices.Contains(q.taken, id) })
		if len(q.ids) == 0 {
			return nil, true
		}
		slices.Sort(q.ids)
		q.ids = slices.Compact(q.ids) // several Listen calls of this backend list the same ids
	}
	if len(q.ids) > 0 && len(q.ids) <= smallClaimMax && fresh {
		k := min(n, len(q.ids))
		ids = slices.Clone(q.ids[:k])
		q.ids = slices.Delete(q.ids, 0, k)
		q.listedSince, q.claimAt = true, now
		if !q.armed {
			q.armed = true
			l.after(l.every, func() { l.recheck(queue) })
		}
		return ids, false
	}
	if !head {
		return nil, false
	}
	q.headAt, q.claimAt, q.listedSince = now, now, false
	return nil, false
}

// left reports whether ids are listed for a queue.
func (l *listedJobs) left(queue string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[queue]
	return q != nil && len(q.ids) > 0
}

// took records the jobs a claim of a queue took.
func (l *listedJobs) took(queue string, jobs []*backend.JobRow) {
	if len(jobs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queue)
	if drop := len(q.taken) + len(jobs) - takenMax; drop > 0 {
		q.taken = slices.Delete(q.taken, 0, min(drop, len(q.taken)))
	}
	for _, j := range jobs[max(0, len(jobs)-takenMax):] {
		q.taken = append(q.taken, j.ID)
	}
}

// headBegins records that a head claim of a queue begins: one that is
// not small (forClaim decides those).
func (l *listedJobs) headBegins(queue string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queue)
	q.headAt, q.claimAt, q.listedSince = now, now, false
}

// headDone records a head claim of a queue that began when its list
// held the ids up to upTo and took jobs taken of the n it asked for. One
// that came back short took every due job committed before it began that
// no other claim held: the ids listed by then need no claim of their own.
// One that came back full took the listed jobs among its own.
func (l *listedJobs) headDone(queue string, upTo int64, taken []*backend.JobRow, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[queue]
	if q == nil || len(q.ids) == 0 {
		return
	}
	if len(taken) < n {
		q.ids = slices.DeleteFunc(q.ids, func(id int64) bool { return id <= upTo })
		return
	}
	took := make(map[int64]bool, len(taken))
	for _, j := range taken {
		took[j.ID] = true
	}
	q.ids = slices.DeleteFunc(q.ids, func(id int64) bool { return took[id] })
}

// maxListed is the highest id listed for a queue, 0 when none is.
func (l *listedJobs) maxListed(queue string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m int64
	if q := l.queues[queue]; q != nil {
		for _, id := range q.ids {
			m = max(m, id)
		}
	}
	return m
}

// recheck wakes a queue whose listed claims began after its last head
// claim, once its last claim is l.every old: its next claim is a head
// claim, for the jobs no list names. Without it, a burst's last listed
// claims would leave those to the next poll. While claims keep coming,
// the first after the bound is a head claim (forClaim), and no wake-up
// is needed.
func (l *listedJobs) recheck(queue string) {
	now := l.now()
	l.mu.Lock()
	q := l.queues[queue]
	q.armed = false
	if !q.listedSince {
		l.mu.Unlock()
		return
	}
	if wait := q.claimAt.Add(l.every).Sub(now); wait > 0 {
		q.armed = true
		l.after(wait, func() { l.recheck(queue) })
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.wake(queue)
}

// claimListed claims, in transaction tx, those of ids that are due
// pending jobs of p's queue no other claim holds: the claim's SELECT by
// primary key, then its UPDATE (claimRows).
func (b *Backend) claimListed(ctx context.Context, tx *sql.Tx, p *backend.JobClaimParams, ids []int64) ([]*backend.JobRow, error) {
	rows, err := tx.QueryContext(ctx, b.sql.claimSelectIDs+inList(ids)+"\nORDER BY priority, run_at, id LIMIT "+strconv.Itoa(len(ids))+" FOR UPDATE SKIP LOCKED", p.Queue, p.Queue)
	if err != nil {
		return nil, err
	}
	return b.claimLocked(ctx, tx, p, rows)
}

// claimListedNoWait is a claim of the listed jobs ids of p's queue in two
// round trips, with no transaction of its own (MariaDB): a plain read of
// those that are due pending jobs of the queue, by primary key, then one
// autocommit UPDATE of the rows whose fence (their version) is still the
// one read, as the optimistic strategy claims (claimPicked). The
// transaction of claimListed took four: BEGIN, the locking SELECT, the
// UPDATE and COMMIT, each a round trip to a server that, at 1,000 jobs a
// second, is busy with the inserts' commits, and each a wait in its CPU's
// queue on a pickup's path (docs/benchmarks/2026-12-02.md, "MariaDB
// pickup at 1,000 jobs a second").
//
// The UPDATE must not wait where the locking SELECT skipped: a row
// another transaction holds (another process's head claim, a caller's
// transaction that changes a pending job) would hold the pickup of every
// job of the claim, and the queue's turn, until that transaction ends.
// So it runs with innodb_lock_wait_timeout 0 (MariaDB's NOWAIT), and a
// lock it would wait for rolls the statement back whole (1205): nothing
// is claimed, and done is false, for the caller to claim the ids in a
// transaction that skips the locked rows. A short count means another
// claim took some rows after the read (their fence moved), and a third
// round trip asks which are this claim's.
func (b *Backend) claimListedNoWait(ctx context.Context, p *backend.JobClaimParams, ids []int64) (jobs []*backend.JobRow, done bool, err error) {
	rows, err := b.db.QueryContext(ctx, b.sql.claimSelectIDs+inList(ids)+"\nORDER BY priority, run_at, id LIMIT "+strconv.Itoa(len(ids)), p.Queue, p.Queue)
	if err != nil {
		return nil, false, err
	}
	heads, now, err := collectClaimed(rows, p.Queue)
	if err != nil || len(heads) == 0 {
		return nil, err == nil, err
	}
	picked := make([]int64, len(heads))
	fences := make([]int32, len(heads))
	for i, j := range heads {
		picked[i], fences[i] = j.ID, j.Fence
	}
	at := sqlTime(now)
	res, err := b.db.ExecContext(ctx, noWaitPrefix+b.sql.optimisticUpdate+inList(picked)+leaseGuard(picked, fences),
		at, micros(p.Lease), leaseHolder(p.ClaimID), at)
	if lockErrorNumber(err) != 0 {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, false, err
	}
	won, err := b.claimWinners(ctx, p, heads, picked, n, now)
	return won, err == nil, err
}

// noWaitPrefix makes the statement after it fail at once (1205), rolled
// back whole, rather than wait for a row lock (MariaDB).
const noWaitPrefix = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR "
