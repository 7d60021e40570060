package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// executor runs claimed jobs, each on a goroutine of its own, records them
// in the running set while they run, and hands their outcomes to the outcome
// writer.
type executor struct {
	cfg      *Config
	logger   *slog.Logger
	failures *failureLog
	running  *runningJobs
	out      *outcomeWriter
	// idleRunners hands a job to a goroutine waiting for one (run).
	idleRunners chan func()
	// jobsBase is the parent of every job context: the values of the
	// context Start was given, never cancelled (a hard stop cancels each
	// running job through the running set), so a job's context registers
	// with no parent.
	jobsBase context.Context
	// leaseClock: end a handler when its lease runs out by this client's
	// clock (heldUntil). Off for a store that credits stalls to leases
	// (backend.StallCrediter), where only a heartbeat can tell.
	leaseClock bool
	// stepsWithOutcome: the store writes the step records an outcome
	// carries (backend.OutcomeStepWriter), so a run's records still queued
	// when its handler returns go with its outcome (StepHandover).
	stepsWithOutcome bool
	// gaveUp is closed when a stop gives up on handlers that ignore their
	// context; stopped when the stop has finished.
	gaveUp, stopped <-chan struct{}
	// settling counts outcomes held until their runs' durable writes are
	// written (Settler); a stop waits for them before it closes the writer.
	settling settleCount
}

// settleCount counts outcomes held for their runs' durable writes. Unlike
// a WaitGroup it may be waited on while a late handler (one a stop gave
// up on) still adds to it.
type settleCount struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0, made by a waiter
}

func (c *settleCount) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *settleCount) done() {
	c.mu.Lock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
}

// zero returns a channel closed once no outcome is held.
func (c *settleCount) zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	return c.idle
}

// jobSource is where a job goroutine takes its next job from once it has
// finished one (the producer's buffer of claimed jobs).
type jobSource interface {
	// next returns the next job to run, checked at now to have at least
	// half its lease left, or ok false once the goroutine's slot is given
	// back.
	next() (j bufferedJob, now time.Time, ok bool)
}

// start runs a claimed job on a goroutine of its own, hands its outcome to
// the outcome writer, then runs the jobs src gives it, until src has none.
//
// A goroutine that takes its next job itself costs no hand-off: handing each
// slot back to the producer and waiting for it to hand over the next job
// costs channel operations and goroutine wake-ups per job, a large part
// of the client's CPU in a drain (BENCHMARKS.md, "Job goroutines take their
// next job themselves").
//
// A handler that returns after a stop gave up on it finds the outcome writer
// closed: its outcome is dropped (the stop wrote a retry for the job).
func (x *executor) start(j bufferedJob, src jobSource) {
	x.runJob(func() {
		for now, ok := time.Now(), true; ok; j, now, ok = src.next() {
			x.run(j, now)
		}
	})
}

// run runs one job on the calling goroutine, from began. The producer
// checked that at least half the lease was left; the check is made again at
// began, taken on the job's goroutine just before the handler, because the
// process can be paused (or starved) between the two: a pause there would
// otherwise start the handler on a lease that ended meanwhile.
func (x *executor) run(j bufferedJob, began time.Time) {
	row := j.row
	if late := began.Sub(j.claimedAt); late > x.cfg.LeaseDuration/2 {
		x.logger.Warn("spool: a claimed job was handed back unstarted: the process stalled between its claim and its start (paused or starved) until less than half its lease was left",
			"job_id", row.ID, "kind", row.Kind, "since_claim_sent", late.Round(time.Millisecond))
		x.out.addRun(backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeRelease}, row.Queue, nil, true)
		return
	}
	finish, rejectExpected, settled, take := x.executeIn(x.jobsBase, row, j.claimedAt, began)
	took := time.Since(began)
	if !rejectExpected {
		x.failures.record(row, &finish, took)
	}
	// run and finish are values the goroutine below does not capture (it
	// takes copies of its own), so they stay on this goroutine's stack: no
	// allocation per job.
	run := runInfo{kind: row.Kind, queue: row.Queue, attempt: row.Attempt, maxAttempts: row.MaxAttempts, duration: took}
	if settled != nil {
		// The run's step records are still being written: its outcome
		// follows them, and its goroutine goes on to the next job.
		x.settling.add()
		later, f := run, finish
		go func() {
			defer x.settling.done()
			<-settled
			if take != nil {
				f.Steps = take()
			}
			x.handIn(row, f, &later, rejectExpected)
		}()
		return
	}
	if take != nil {
		finish.Steps = take()
	}
	x.handIn(row, finish, &run, rejectExpected)
}

// handIn hands a run's outcome to the writer.
func (x *executor) handIn(row *backend.JobRow, finish backend.JobFinish, run *runInfo, rejectExpected bool) {
	if !x.out.addRunOf(row, finish, run, rejectExpected) {
		x.logger.Warn("spool: a job's handler returned after the client's stop gave up; its outcome was not written (the stop recorded a retry for the job, or names it in its error)",
			"job_id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "outcome", finish.Outcome)
	}
}

// runnerIdle is how long a goroutine that ran a job waits for the next.
const runnerIdle = 5 * time.Second

// runJob runs task on an idle job goroutine, or a new one. A goroutine that
// finished a job waits up to runnerIdle for the next (until the client has
// stopped) instead of exiting, so the stack a handler grew (JSON decoding,
// the handler itself) is kept rather than grown and copied again for
// every job (BENCHMARKS.md, "Levers of the third session, before and
// after").
func (x *executor) runJob(task func()) {
	select {
	case x.idleRunners <- task:
	default:
		go x.runnerLoop(task)
	}
}

func (x *executor) runnerLoop(task func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		task()
		task = nil
		idle.Reset(runnerIdle)
		select {
		case task = <-x.idleRunners:
		case <-idle.C:
			return
		case <-x.stopped:
			return
		}
	}
}

// executeIn runs one job claimed by a claim sent at claimedAt, started at
// startedAt, in a context derived from
// parent, and returns the outcome to write (a value: a pointer cost an
// allocation per job), and whether the store is
// expected to reject it: the handler called CompleteTx (if that transaction
// committed, the write is a fenced no-op; if it rolled back, the outcome is
// what happened), or the job's lease was found lost.
func (x *executor) executeIn(parent context.Context, row *backend.JobRow, claimedAt, startedAt time.Time) (f backend.JobFinish, rejectExpected bool, settled <-chan struct{}, take func() []backend.StepRecordParams) {
	h, ok := x.cfg.Handler(row.Kind)
	if !ok {
		err := fmt.Errorf("%w %q in this client", ErrUnknownKind, row.Kind)
		return x.failure(row, err, "", x.cfg.NextRetry(int(row.Attempt))), false, nil, nil
	}
	timeout := h.Timeout(row)
	if timeout == 0 {
		timeout = x.cfg.JobTimeout
	}
	runCtx, cancel := newJobContext(parent, x.out.be, row, startedAt, timeout)
	defer cancel(nil)
	x.cfg.Observer.started(row, startedAt)
	runCtx.running = runningJob{lease: row.Lease(), kind: row.Kind, queue: row.Queue, attempt: int(row.Attempt),
		started: startedAt, timeout: timeout, ctx: runCtx, cancel: cancel}
	if x.leaseClock {
		runCtx.running.heldUntil = claimedAt.Add(x.cfg.LeaseDuration)
	}
	x.running.add(&runCtx.running)
	err := safeRun(runCtx, h.Run, row)
	err = runCtx.run.finish(runCtx, err)
	// The run's records still queued go with its outcome when the store
	// writes them there (StepHandover); else the outcome waits for them.
	settled, take = runCtx.run.handOver(x.stepsWithOutcome)
	// The store will reject this outcome, as expected, if CompleteTx
	// committed it already or the lease was lost (cancelled or rescued).
	rejectExpected = x.running.handlerDone(row.Lease()) || errors.Is(context.Cause(runCtx), ErrLeaseLost)
	f = x.outcomeOf(row, &h, err, runCtx, timeout)
	f.Durable = runCtx.run.UsedDurable()
	return f, rejectExpected, settled, take
}

// outcomeOf is the outcome to write for row, whose run in runCtx (with
// timeout) by h returned err.
func (x *executor) outcomeOf(row *backend.JobRow, h *Handler, err error, runCtx context.Context, timeout time.Duration) backend.JobFinish {
	if err == nil {
		return backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeComplete}
	}

	var (
		oe  *OutcomeError
		de  *DecodeError
		pe  *panicError
		msg = err.Error()
	)
	switch {
	case errors.As(err, &oe):
		f := backend.JobFinish{Lease: row.Lease(), Outcome: oe.Outcome, Delay: max(oe.Delay, 0)}
		if oe.Err != nil {
			f.Error = &backend.AttemptError{Attempt: int(row.Attempt), Error: oe.Err.Error()}
		}
		return f
	case errors.As(err, &de):
		return backend.JobFinish{Lease: row.Lease(), Outcome: backend.OutcomeDiscard,
			Error: &backend.AttemptError{Attempt: int(row.Attempt), Error: fmt.Sprintf("args of kind %q do not decode (not retried): %v", row.Kind, de.Err)}}
	}
	cause := context.Cause(runCtx)
	leaseCut := false
	switch {
	case errors.Is(cause, ErrClientStopping):
		// Interrupted by a hard stop: the attempt counts, the retry is immediate.
		return x.failure(row, fmt.Errorf("interrupted by client stop: %s", msg), "", 0)
	case errors.Is(cause, errJobTimeout):
		msg = fmt.Sprintf("job timed out after %s: %s", timeout, msg)
	case errors.Is(cause, ErrLeaseLost):
		leaseCut = true
		if !errors.Is(err, ErrLeaseLost) {
			msg = fmt.Sprintf("%v: %s", cause, msg)
		}
	}
	trace := ""
	if errors.As(err, &pe) {
		trace = pe.stack
	}
	if leaseCut {
		// Cut off by its lease's end or loss (the process paused, the
		// database out of reach), not failed on its own: like a rescue,
		// the attempt counts and the retry is due at once, not after a
		// backoff that grows with the attempts the same faults cost it.
		// Its fence rejects it if another run has the job already.
		return x.failure(row, errors.New(msg), trace, 0)
	}
	delay, ok := h.NextRetry(row)
	if !ok {
		delay = x.cfg.NextRetry(int(row.Attempt))
	}
	return x.failure(row, errors.New(msg), trace, delay)
}

func (x *executor) failure(row *backend.JobRow, err error, trace string, delay time.Duration) backend.JobFinish {
	return backend.JobFinish{
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
