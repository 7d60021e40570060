package spool

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// runningJob is a job this client holds, as the heartbeat sees it: from the
// start of its handler until its outcome is written.
type runningJob struct {
	lease         backend.LeaseRef
	kind          string
	attempt       int
	started       time.Time
	timeout       time.Duration // 0: none
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
}

// runningJobs is the set of jobs this client holds.
type runningJobs struct {
	mu   sync.Mutex
	jobs map[int64]*runningJob
}

func (r *runningJobs) add(j *runningJob) {
	r.mu.Lock()
	r.jobs[j.lease.ID] = j
	r.mu.Unlock()
}

// handlerDone records that a job's handler returned, and reports whether
// the store is expected to fence out its outcome: CompleteTx was called for
// it (its transaction may have committed or not), or the client already
// wrote an outcome for the job when the handler did not return. The job
// stays held, and heartbeated, until its outcome is written.
func (r *runningJobs) handlerDone(lease backend.LeaseRef) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[lease.ID]
	if j == nil || j.lease != lease {
		return false
	}
	j.handlerDone = true
	return j.completedInTx || j.abandoned
}

// overrun returns the jobs whose handler is still running grace after its
// timeout ended its context, and marks them abandoned: the handler ignores
// its context, and its lease is no longer extended.
func (r *runningJobs) overrun(now time.Time, grace time.Duration) []runningJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runningJob
	for _, j := range r.jobs {
		if j.handlerDone || j.abandoned || j.completedInTx || j.timeout <= 0 {
			continue
		}
		if !errors.Is(context.Cause(j.ctx), errJobTimeout) || now.Before(j.started.Add(j.timeout+grace)) {
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
		if j := r.jobs[l.ID]; j != nil && j.lease == l {
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
		if j.handlerDone {
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

// remove forgets jobs whose outcome was written (or given up on). A job is
// matched by its whole lease: the same id may be held again under a newer one.
func (r *runningJobs) remove(leases []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if j := r.jobs[l.ID]; j != nil && j.lease == l {
			delete(r.jobs, l.ID)
		}
	}
}

// holds reports whether the client holds a job with this id.
func (r *runningJobs) holds(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id] != nil
}

func (r *runningJobs) markCompletedInTx(id int64) {
	r.mu.Lock()
	if j := r.jobs[id]; j != nil {
		j.completedInTx = true
	}
	r.mu.Unlock()
}

// live returns the leases to extend: jobs whose handler runs with a live
// context (one that timed out or was cancelled stops extending its lease), and
// jobs whose outcome waits to be written.
func (r *runningJobs) live() []backend.LeaseRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]backend.LeaseRef, 0, len(r.jobs))
	for _, j := range r.jobs {
		if j.handlerDone || j.ctx.Err() == nil {
			out = append(out, j.lease)
		}
	}
	return out
}

// sortLost splits leases a heartbeat found lost into those of handlers that
// still run, and those whose handler called CompleteTx: for these the loss
// is usually that transaction's commit, which ends the lease as intended.
// Leases of handlers that returned are left out: their outcome was usually
// just written, and otherwise the completer reports the rejected write.
func (r *runningJobs) sortLost(leases []backend.LeaseRef) (running, inTx []backend.LeaseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		j := r.jobs[l.ID]
		switch {
		case j == nil || j.lease != l || j.handlerDone:
		case j.completedInTx:
			inTx = append(inTx, l)
		default:
			running = append(running, l)
		}
	}
	return running, inTx
}

// cancelRunning cancels the handlers still running under the given leases
// and returns how many it cancelled. A lost lease of a job whose handler has
// returned needs nothing: usually its outcome was just written (the row is
// no longer running), otherwise the completer reports the rejected write.
func (r *runningJobs) cancelRunning(leases []backend.LeaseRef, cause error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range leases {
		if j := r.jobs[l.ID]; j != nil && j.lease == l && !j.handlerDone {
			j.cancel(cause)
			n++
		}
	}
	return n
}

// errJobTimeout is the context cause when a job runs past its timeout.
var errJobTimeout = errors.New("job timed out")

// panicError is a recovered panic in a handler.
type panicError struct {
	value any
	stack string
}

// Error implements error.
func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// startJob runs a claimed job on a goroutine of its own, hands its outcome
// to the completer, then frees its slot.
//
// A handler that returns after a stop gave up on it finds its producer gone
// and the completer closed: its outcome is dropped (the stop wrote a retry
// for the job) and its slot needs no freeing.
//
// The producer checked that at least half the lease was left; the check is
// made again on the job's goroutine, just before the handler, because the
// process can be paused (or starved) between the two: a pause there would
// otherwise start the handler on a lease that ended meanwhile.
func (c *Client) startJob(row *backend.JobRow, claimedAt time.Time, done chan<- struct{}) {
	c.runJob(func() {
		defer func() {
			select {
			case done <- struct{}{}:
			case <-c.gaveUp:
			}
		}()
		if late := time.Since(claimedAt); late > c.config.LeaseDuration/2 {
			c.logger.Warn("spool: a claimed job was handed back unstarted: the process stalled between its claim and its start (paused or starved) until less than half its lease was left",
				"job_id", row.ID, "kind", row.Kind, "since_claim_sent", late.Round(time.Millisecond))
			c.completer.addRun(backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeRelease}, row.Queue, true)
			return
		}
		finish, rejectExpected := c.execute(row)
		if !c.completer.addRun(*finish, row.Queue, rejectExpected) {
			c.logger.Warn("spool: a job's handler returned after the client's stop gave up waiting for it; its outcome was not written (the stop recorded a retry for the job)",
				"job_id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "outcome", finish.Outcome)
		}
	})
}

// runnerIdle is how long a goroutine that ran a job waits for the next.
const runnerIdle = 5 * time.Second

// runJob runs task on an idle job goroutine, or a new one. A goroutine that
// finished a job waits up to runnerIdle for the next (until the client has
// stopped) instead of exiting, so the stack a handler grew (JSON decoding,
// the handler itself) is kept: a new goroutine per job spent 12-20% of the
// client's CPU growing and copying stacks in a drain (--cpuprofile:
// runtime.newstack 120 ms, copystack 70 ms of 950 ms).
func (c *Client) runJob(task func()) {
	select {
	case c.idleRunners <- task:
	default:
		go c.runnerLoop(task)
	}
}

func (c *Client) runnerLoop(task func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		task()
		task = nil
		idle.Reset(runnerIdle)
		select {
		case task = <-c.idleRunners:
		case <-idle.C:
			return
		case <-c.stopped:
			return
		}
	}
}

// execute runs one job and returns the outcome to write, and whether the
// store is expected to reject it: the handler called CompleteTx (if that
// transaction committed, the write is a fenced no-op; if it rolled back, the
// outcome is what happened), or the job's lease was found lost.
func (c *Client) execute(row *backend.JobRow) (f *backend.JobFinish, rejectExpected bool) {
	entry, ok := c.config.Workers.get(row.Kind)
	if !ok {
		err := fmt.Errorf("%w %q in this client", ErrUnknownKind, row.Kind)
		return c.failure(row, err, "", c.config.RetryPolicy.NextRetry(int(row.Attempt))), false
	}
	timeout := entry.timeout(row)
	if timeout == 0 {
		timeout = c.config.JobTimeout
	}
	ctx, cancel := context.WithCancelCause(c.jobsCtx)
	defer cancel(nil)
	runCtx := ctx
	if timeout > 0 {
		var cancelTimeout context.CancelFunc
		runCtx, cancelTimeout = context.WithTimeoutCause(ctx, timeout, errJobTimeout)
		defer cancelTimeout()
	}
	started := time.Now()
	c.running.add(&runningJob{lease: row.Lease(), kind: row.Kind, attempt: int(row.Attempt), started: started, timeout: timeout, ctx: runCtx, cancel: cancel})
	err := safeRun(runCtx, entry.run, row)
	// The store will reject this outcome, as expected, if CompleteTx
	// committed it already or the lease was lost (cancelled or rescued).
	rejectExpected = c.running.handlerDone(row.Lease()) || errors.Is(context.Cause(runCtx), ErrLeaseLost)
	if err == nil {
		return &backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeComplete}, rejectExpected
	}

	var (
		oe  *outcomeError
		de  *errDecode
		pe  *panicError
		msg = err.Error()
	)
	switch {
	case errors.As(err, &oe):
		f := &backend.JobFinish{Lease: row.Lease(), Outcome: oe.outcome, Delay: oe.delay}
		if oe.err != nil {
			f.Error = &backend.AttemptError{Attempt: int(row.Attempt), Error: oe.err.Error()}
		}
		return f, rejectExpected
	case errors.As(err, &de):
		return &backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeDiscard,
			Error: &backend.AttemptError{Attempt: int(row.Attempt), Error: fmt.Sprintf("args of kind %q do not decode (not retried): %v", row.Kind, de.err)}}, rejectExpected
	}
	cause := context.Cause(runCtx)
	switch {
	case errors.Is(cause, ErrClientStopping):
		// Interrupted by a hard stop: the attempt counts, the retry is immediate.
		return c.failure(row, fmt.Errorf("interrupted by client stop: %s", msg), "", 0), rejectExpected
	case errors.Is(cause, errJobTimeout):
		msg = fmt.Sprintf("job timed out after %s: %s", timeout, msg)
	case errors.Is(cause, ErrLeaseLost):
		msg = fmt.Sprintf("lease lost: %s", msg)
	}
	trace := ""
	if errors.As(err, &pe) {
		trace = pe.stack
	}
	delay, ok := entry.nextRetry(row)
	if !ok {
		delay = c.config.RetryPolicy.NextRetry(int(row.Attempt))
	}
	c.logger.Debug("spool: job failed", "job_id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "error", msg, "elapsed", time.Since(started))
	return c.failure(row, errors.New(msg), trace, delay), rejectExpected
}

func (c *Client) failure(row *backend.JobRow, err error, trace string, delay time.Duration) *backend.JobFinish {
	return &backend.JobFinish{
		Lease:   row.Lease(),
		Outcome: backend.OutcomeRetry,
		Delay:   max(delay, 0),
		Error:   &backend.AttemptError{Attempt: int(row.Attempt), Error: err.Error(), Trace: trace},
	}
}

// safeRun calls run, turning a panic into a *panicError with its stack.
func safeRun(ctx context.Context, run func(context.Context, *backend.JobRow) error, row *backend.JobRow) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: string(debug.Stack())}
		}
	}()
	return run(ctx, row)
}

// heartbeatNow asks for a heartbeat at once, e.g. because a job this client
// holds was cancelled.
func (c *Client) heartbeatNow() {
	select {
	case c.beatNow <- struct{}{}:
	default:
	}
}

// heartbeatLoop extends the leases of held jobs every third of the lease (or
// at once when asked), in one write, and cancels jobs whose lease is gone.
func (c *Client) heartbeatLoop() {
	ctx := c.servicesCtx
	interval := c.config.LeaseDuration / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.beatNow:
		}
		c.abandonOverrun(ctx, interval)
		leases := c.running.live()
		if len(leases) == 0 {
			continue
		}
		hbCtx, cancel := context.WithTimeout(ctx, interval)
		res, err := c.backend.JobHeartbeatMany(hbCtx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: c.config.LeaseDuration})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.logger.Warn("spool: heartbeat failed; leases not extended", "jobs", len(leases), "error", err)
			}
			continue
		}
		if len(res.Lost) > 0 {
			c.leasesLost(ctx, res.Lost, interval)
		}
	}
}

// maxLossLookups bounds the rows read to explain lost leases after one beat.
const maxLossLookups = 20

// leasesLost cancels the handlers whose lease a heartbeat found lost and
// logs why each was lost, read from the job's row. A lease ended by the
// commit of the handler's own CompleteTx is no news.
func (c *Client) leasesLost(ctx context.Context, lost []backend.LeaseRef, timeout time.Duration) {
	running, inTx := c.running.sortLost(lost)
	if len(running) == 0 && len(inTx) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows := make(map[backend.LeaseRef]*backend.JobRow, len(running)+len(inTx))
	errs := make(map[backend.LeaseRef]error)
	lookups := 0
	lookup := func(l backend.LeaseRef) {
		if lookups >= maxLossLookups {
			return
		}
		lookups++
		row, err := c.backend.JobGet(lctx, l.ID)
		if err != nil {
			errs[l] = err
			return
		}
		rows[l] = row
	}
	for _, l := range inTx {
		lookup(l)
		row, err := rows[l], errs[l]
		switch {
		case row != nil && row.Fence == l.Fence && row.State == backend.StateCompleted:
			continue // the CompleteTx transaction committed
		case errors.Is(err, backend.ErrNotFound) && c.config.CompletedRetention < 0:
			continue // committed, and the row deleted on completion
		case row == nil && err == nil:
			continue // past the lookup bound: assume the commit, as is usual
		}
		running = append(running, l)
	}
	n := c.running.cancelRunning(running, ErrLeaseLost)
	if n == 0 {
		return
	}
	causes := make([]string, 0, len(running))
	for _, l := range running {
		if _, ok := rows[l]; !ok && errs[l] == nil {
			lookup(l)
		}
		if row, err := rows[l], errs[l]; row != nil || err != nil {
			causes = append(causes, fmt.Sprintf("job %d: %s", l.ID, leaseLossCause(l, row, err)))
		}
	}
	if len(causes) < len(running) {
		causes = append(causes, fmt.Sprintf("%d more not looked up", len(running)-len(causes)))
	}
	c.logger.Warn("spool: job leases no longer held; cancelling those jobs' handlers", "jobs", n, "causes", strings.Join(causes, "; "))
}

// leaseLossCause says, from the job's row as it is now, why the lease l is
// no longer held.
func leaseLossCause(l backend.LeaseRef, row *backend.JobRow, err error) string {
	const missed = "this process's heartbeats did not reach the database within the lease (it was paused, starved or cut off from the database)"
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return "the job was deleted"
	case err != nil:
		return fmt.Sprintf("could not read the job to tell why (%v)", err)
	case row.State == backend.StateCancelled:
		return "cancelled by a user"
	case row.Fence > l.Fence && row.State == backend.StateRunning:
		return fmt.Sprintf("rescued after its lease ended and claimed again by %s: %s", row.LeasedBy, missed)
	case row.Fence > l.Fence:
		return fmt.Sprintf("rescued after its lease ended and claimed again since (now %s): %s", row.State, missed)
	case row.State == backend.StateRetryable || row.State == backend.StateAvailable || row.State == backend.StateDiscarded:
		return fmt.Sprintf("rescued after its lease ended (now %s): %s", row.State, missed)
	case row.State == backend.StateCompleted:
		return "already completed under this lease (by CompleteTx in a transaction that committed)"
	default:
		return fmt.Sprintf("the job is now %s under fence %d", row.State, row.Fence)
	}
}

// abandonOverrun records a retry for jobs whose handler is still running
// grace after its timeout: the handler ignores its context, Go cannot stop
// it, and its lease is no longer extended. Without this the lease would run
// out and rescue would blame a crash. The retry waits one lease, as rescue
// would have, so the new attempt is unlikely to overlap the stuck handler;
// the handler keeps its worker slot until it returns.
func (c *Client) abandonOverrun(ctx context.Context, grace time.Duration) {
	jobs := c.running.overrun(time.Now(), grace)
	if len(jobs) == 0 {
		return
	}
	finishes := make([]backend.JobFinish, len(jobs))
	for i, j := range jobs {
		msg := fmt.Sprintf("job timed out after %s and its handler had not returned %s later (it ignores its context); retried after one lease", j.timeout, grace.Round(time.Millisecond))
		finishes[i] = backend.JobFinish{Lease: j.lease, Outcome: backend.OutcomeRetry, Delay: c.config.LeaseDuration,
			Error: &backend.AttemptError{Attempt: j.attempt, Error: msg}}
		c.logger.Warn("spool: a job's handler ignores its context: it is still running past its timeout; recorded a retry, the handler keeps its worker slot until it returns",
			"job_id", j.lease.ID, "kind", j.kind, "attempt", j.attempt, "timeout", j.timeout, "running_for", time.Since(j.started).Round(time.Millisecond))
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if _, err := c.backend.JobFinishMany(wctx, &backend.JobFinishManyParams{Finishes: finishes}); err != nil {
		c.running.unabandon(leasesOf(finishes))
		if ctx.Err() == nil {
			c.logger.Warn("spool: could not record the retry of jobs whose handler overran its timeout; trying again at the next heartbeat", "jobs", len(jobs), "error", err)
		}
	}
}
