package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// runningJob is a job this client holds, as the heartbeat sees it: from the
// start of its handler until its outcome is written.
type runningJob struct {
	lease   backend.LeaseRef
	kind    string
	queue   string
	attempt int
	started time.Time
	timeout time.Duration // 0: none
	// heldUntil is the latest time the job's lease is known to last: the
	// send time of the claim, or of the last heartbeat that extended it,
	// plus the lease. The database started or extended the lease no
	// earlier than that send, so its lease ends no earlier; past heldUntil
	// the job may have been rescued and the handler is cancelled (zero:
	// not tracked).
	heldUntil     time.Time
	ctx           context.Context
	cancel        context.CancelCauseFunc
	completedInTx bool
	// handlerDone: the handler returned; the outcome waits to be written.
	handlerDone bool
	// abandoned: the client wrote an outcome on the handler's behalf
	// because the handler did not return (it overran its timeout, or a stop
	// gave up on it); the handler's own outcome, if it ever returns, is
	// expected to be fenced out.
	abandoned bool
	// gathered: a job of a many-worker kind claimed and waiting for its
	// group to fill (many.go): its lease is extended as a running job's,
	// but no handler runs it yet, so no timeout, overrun or stop gives up
	// on it; the producer hands it back unstarted at a stop.
	gathered bool
	// call is the many-call the job runs in (nil: a single job's run);
	// callCounted records that its cancellation was counted there.
	call        *manyCall
	callCounted bool
	// leaseGone: the handler was cancelled because its lease was found
	// lost or ended unextended, and the loss was counted and logged; a
	// later beat that finds the same lease lost (two beats in flight, or
	// a cancellation's own beat beside its wake-up's) is no news.
	leaseGone bool
}

// deadline is when the job's timeout ends its run (zero: no timeout), as
// its context reports it.
func (j *runningJob) deadline() time.Time {
	if j.timeout <= 0 {
		return time.Time{}
	}
	return j.started.Add(j.timeout)
}

// errLeaseEnded is the context cause of a handler whose lease ended before
// a heartbeat could extend it: the job may already be rescued and running
// elsewhere, so this run must stop.
var errLeaseEnded = fmt.Errorf("%w: no heartbeat reached the database within the lease (the database was unreachable or too slow, or this process was paused)", ErrLeaseLost)

// runningJobs is the set of jobs this client holds, by lease: a job rescued
// from this client and claimed by it again runs under a second lease while
// its first run may still be winding down, and each must be cancelled and
// removed on its own.
type runningJobs struct {
	mu   sync.Mutex
	jobs map[backend.LeaseRef]*runningJob
	// stopCause, once a hard stop began, cancels every job added after it.
	stopCause error

	// timer ends the runs whose deadline or lease has passed (expire). One timer for
	// the set, armed for the earliest deadline it knows of, instead of one
	// per job, which would be started and stopped for every job
	// (BENCHMARKS.md, "Fewer allocations per claimed job"). Jobs that
	// start in turn with the same timeout leave it armed as it is; one that
	// finishes leaves it armed, and the timer, when it fires early, looks
	// at the jobs held and arms itself for the earliest deadline left.
	timer   *time.Timer
	timerAt time.Time // when timer fires; zero when not armed

	// leaseEnded, when set, is told of the handlers expire cancelled
	// because their lease ended (called without the lock held).
	leaseEnded func([]runningJob)
}

// newRunningJobs returns an empty set.
func newRunningJobs() *runningJobs {
	return &runningJobs{jobs: map[backend.LeaseRef]*runningJob{}}
}

// add records a job whose handler is about to start; after a hard stop
// (stopAll) its context is cancelled at once.
func (r *runningJobs) add(j *runningJob) {
	r.mu.Lock()
	r.jobs[j.lease] = j
	if r.stopCause != nil {
		r.cancelLocked(j, r.stopCause)
	}
	if d := j.nextExpiry(); !d.IsZero() && (r.timerAt.IsZero() || d.Before(r.timerAt)) {
		r.armLocked(d)
	}
	r.mu.Unlock()
}

// nextExpiry is the earlier of the job's deadline and the end of its known
// lease; zero when it has neither.
func (j *runningJob) nextExpiry() time.Time {
	d := j.deadline()
	if h := j.heldUntil; !h.IsZero() && (d.IsZero() || h.Before(d)) {
		return h
	}
	return d
}

// extend records that a heartbeat sent at sentAt extended the leases
// given (the others it carried are unchanged): each now lasts at least
// until sentAt plus lease. A beat that lands after a later one moves
// nothing back.
func (r *runningJobs) extend(leases []backend.LeaseRef, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if j := r.jobs[l]; j != nil && until.After(j.heldUntil) {
			j.heldUntil = until
		}
	}
}

// settled stops tracking the end of the given leases, ended (as far as the
// heartbeat can tell) by the commit of the handler's own CompleteTx: their
// end must not cancel the handler.
func (r *runningJobs) settled(leases []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if j := r.jobs[l]; j != nil {
			j.heldUntil = time.Time{}
		}
	}
}

// heldUntilLatest returns the latest end of the known leases of the jobs
// given (zero when none is tracked).
func (r *runningJobs) heldUntilLatest(leases []backend.LeaseRef) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var latest time.Time
	for _, l := range leases {
		if j := r.jobs[l]; j != nil && j.heldUntil.After(latest) {
			latest = j.heldUntil
		}
	}
	return latest
}

// armLocked sets the timer to fire at at.
func (r *runningJobs) armLocked(at time.Time) {
	r.timerAt = at
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(at), r.expire)
		return
	}
	r.timer.Reset(time.Until(at))
}

// expire ends the runs whose lease has ended (errLeaseEnded) or whose
// deadline has passed (errJobTimeout), and arms the timer for the earliest
// of those times among the runs left. The lease is checked first: a run
// past both may be running elsewhere already, and its outcome is fenced out.
func (r *runningJobs) expire() {
	r.mu.Lock()
	now := time.Now()
	var (
		next  time.Time
		ended []runningJob
	)
	for _, j := range r.jobs {
		if j.handlerDone || j.ctx.Err() != nil {
			continue
		}
		if h := j.heldUntil; !h.IsZero() && !now.Before(h) {
			j.leaseGone = true
			r.cancelLocked(j, errLeaseEnded)
			ended = append(ended, *j)
			continue
		}
		if d := j.deadline(); !d.IsZero() && !now.Before(d) {
			r.cancelLocked(j, errJobTimeout)
			continue
		}
		if d := j.nextExpiry(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	r.timerAt = time.Time{}
	if !next.IsZero() {
		r.armLocked(next)
	}
	leaseEnded := r.leaseEnded
	r.mu.Unlock()
	if len(ended) > 0 && leaseEnded != nil {
		leaseEnded(ended)
	}
}

// stopAll cancels the context of every job held, and of every job added
// from now on, with cause: a hard stop.
func (r *runningJobs) stopAll(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopCause == nil {
		r.stopCause = cause
	}
	for _, j := range r.jobs {
		r.cancelLocked(j, cause)
	}
}

// cancelLocked cancels j's context with cause and, for a job of a
// many-call, counts it there: the call's own context ends with the last of
// its jobs', after it, so that a handler woken by the call's end finds
// every job's context ended too (manyCall). r.mu is held.
func (r *runningJobs) cancelLocked(j *runningJob, cause error) {
	var last *manyCall
	if c := j.call; c != nil && !j.callCounted && j.ctx.Err() == nil {
		j.callCounted = true
		if c.live--; c.live == 0 {
			last = c
		}
	}
	j.cancel(cause)
	if last != nil {
		last.cancel(cause)
	}
}

// handlerDone records that a job's handler returned, and reports whether
// the store is expected to fence out its outcome: CompleteTx was called for
// it (its transaction may have committed or not), or the client already
// wrote an outcome for the job when the handler did not return. The job
// stays held, and heartbeated, until its outcome is written.
func (r *runningJobs) handlerDone(lease backend.LeaseRef) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[lease]
	if j == nil {
		return false
	}
	j.handlerDone = true
	return j.completedInTx || j.abandoned
}

// overrun returns the jobs whose handler is still running grace after its
// timeout ended its context, and marks them abandoned: the handler ignores
// its context, and the client writes a retry on its behalf.
func (r *runningJobs) overrun(now time.Time, grace time.Duration) []runningJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runningJob
	for _, j := range r.jobs {
		if j.handlerDone || j.gathered || j.abandoned || j.completedInTx || j.timeout <= 0 {
			continue
		}
		if !errors.Is(context.Cause(j.ctx), errJobTimeout) || now.Before(j.deadline().Add(grace)) {
			continue
		}
		j.abandoned = true
		out = append(out, *j)
	}
	return out
}

// unabandon undoes overrun's mark for jobs whose outcome could not be
// written, so the next heartbeat tries again.
func (r *runningJobs) unabandon(leases []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if j := r.jobs[l]; j != nil {
			j.abandoned = false
		}
	}
}

// stuck returns the jobs whose handler has not returned, and marks those
// not already abandoned as abandoned; notYetAbandoned reports which ones
// the caller must write an outcome for.
func (r *runningJobs) stuck() (all []runningJob, notYetAbandoned []runningJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if j.handlerDone || j.gathered {
			continue
		}
		all = append(all, *j)
		if !j.abandoned && !j.completedInTx {
			j.abandoned = true
			notYetAbandoned = append(notYetAbandoned, *j)
		}
	}
	return all, notYetAbandoned
}

// unsettled returns the ids of the jobs still held whose outcome the
// outcome writer neither wrote nor gave up: after it is done, those are the
// handlers' outcomes and gathered jobs' releases it refused once closed (a
// stop gave up). A handler still running is not one: the stop names it as
// stuck (abandoned, its retry written by the stop or named unwritten), as
// is one that returned after the stop gave up on it; a job completed in its
// handler's transaction has its outcome there.
func (r *runningJobs) unsettled() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for l, j := range r.jobs {
		if j.gathered || j.handlerDone && !j.abandoned && !j.completedInTx {
			ids = append(ids, l.ID)
		}
	}
	return ids
}

// remove forgets jobs whose outcome was written (or given up on). A job is
// matched by its whole lease: the same id may be held again under a newer one.
func (r *runningJobs) remove(leases []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		delete(r.jobs, l)
	}
}

// any reports whether the client holds a job.
func (r *runningJobs) any() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.jobs) > 0
}

// holds reports whether the client holds a job with this id. It looks
// through the set, which is bounded by the workers and the buffer: it runs
// only for a cancellation, where an index by id would cost every job's
// start and finish a second map write.
func (r *runningJobs) holds(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for l := range r.jobs {
		if l.ID == id {
			return true
		}
	}
	return false
}

func (r *runningJobs) markCompletedInTx(lease backend.LeaseRef) {
	r.mu.Lock()
	if j := r.jobs[lease]; j != nil {
		j.completedInTx = true
	}
	r.mu.Unlock()
}

// live returns the leases to extend: jobs whose handler runs with a live
// context, jobs whose outcome waits to be written, and jobs whose handler
// overran its timeout until the retry written on its behalf lands (so the
// lease does not run out first and rescue blame a crash). A handler whose
// context was cancelled otherwise (its lease lost, a hard stop) stops
// extending its lease.
func (r *runningJobs) live() []backend.LeaseRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]backend.LeaseRef, 0, len(r.jobs))
	for _, j := range r.jobs {
		timedOut := !j.abandoned && errors.Is(context.Cause(j.ctx), errJobTimeout)
		if j.handlerDone || j.ctx.Err() == nil || timedOut {
			out = append(out, j.lease)
		}
	}
	return out
}

// sortLost splits leases a heartbeat found lost into those of handlers that
// still run, and those whose handler called CompleteTx: for these the loss
// is usually that transaction's commit, which ends the lease as intended.
// Leases of handlers that returned are left out: their outcome was usually
// just written, and otherwise the outcome writer reports the rejected write.
func (r *runningJobs) sortLost(leases []backend.LeaseRef) (running, inTx []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		j := r.jobs[l]
		switch {
		case j == nil || j.handlerDone || j.leaseGone:
		case j.completedInTx:
			inTx = append(inTx, l)
		default:
			running = append(running, l)
		}
	}
	return running, inTx
}

// cancelRunning cancels the handlers still running under the given leases,
// whose loss is news, and returns those leases. A lost lease of a job whose
// handler has returned needs nothing: usually its outcome was just written
// (the row is no longer running), otherwise the outcome writer reports the
// rejected write. One already found lost was cancelled and counted then.
func (r *runningJobs) cancelRunning(leases []backend.LeaseRef, cause error) (cancelled []backend.LeaseRef, byQueue map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if j := r.jobs[l]; j != nil && !j.handlerDone && !j.leaseGone {
			j.leaseGone = true
			r.cancelLocked(j, cause)
			cancelled = append(cancelled, l)
			if byQueue == nil {
				byQueue = map[string]int{}
			}
			byQueue[j.queue]++
		}
	}
	return cancelled, byQueue
}
