package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// Jobs of a kind registered to take many jobs per call (Handler.RunMany)
// are claimed as any other: by their queue's producer, in its claims. The
// producer takes them out of its buffer as it would start them, each into
// a worker slot of its own, and gathers them into groups by kind and group
// key (ManyRules.GroupKey). A group's call starts, on one goroutine, when
// it holds MaxJobs jobs, when MaxWait has passed since its first job
// joined, or when the queue has no free slot left (no job could join it).
//
// A gathered job is in the running set from the moment it joins, so the
// heartbeat extends its lease while it waits, and a lost lease or a
// cancellation cancels it there as it would a running job; the call leaves
// out the gathered jobs whose context ended before it started and hands
// them back unstarted. In the call each job keeps its own context (its
// lease, its cancellation, its Run for outputs and metadata: JobContextIn),
// and the call's context ends when every one of its jobs' has ended (all
// timed out together, or all cancelled, or a hard stop). Each job gets its
// own outcome, written, counted and reported as a single job's.

// ManyRules is how the producer gathers the jobs of a kind whose handler
// takes many jobs per call.
type ManyRules struct {
	// MaxJobs bounds the jobs of one call (at least 1). A call also never
	// holds more jobs than its queue has worker slots: each job takes one.
	MaxJobs int
	// MaxWait is how long the first job of a group waits for the group to
	// fill before its call starts anyway (0: a call starts with the jobs
	// at hand).
	MaxWait time.Duration
	// GroupKey, when set, returns a job's group: only jobs of the same kind
	// and key share a call. It runs on the producer's goroutine.
	GroupKey func(row *backend.JobRow) string
}

// manyCall ties the jobs of one call to the call's context: live counts
// the jobs whose context has not ended (guarded by runningJobs.mu), and
// the call's context is cancelled, with the last job's cause, when it
// reaches zero.
type manyCall struct {
	live   int
	cancel context.CancelCauseFunc
}

// callContext is the context a many-call's handler runs in. It reports the
// call's deadline, and carries the contexts of the call's jobs
// (JobContextIn).
type callContext struct {
	context.Context
	deadline time.Time
	jobs     []*jobContext
	// byID indexes jobs for JobContextIn, built at its first use.
	byIDOnce sync.Once
	byID     map[int64]*jobContext
}

type callKey struct{}

// Deadline reports when the call's timeout ends it.
func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Err is context.DeadlineExceeded once the timeout ended the call, as for
// a job's context.
func (c *callContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == errJobTimeout {
		return context.DeadlineExceeded
	}
	return err
}

// Value returns the call for its key and the parent's values otherwise.
func (c *callContext) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// JobContextIn returns the context of job id within the many-call whose
// context (or a context derived from it) ctx is: it carries the job's Run
// and ends when the job's lease is lost, the job is cancelled, it times
// out or the client stops hard. A job's own context is returned as it is.
// ok is false when ctx is neither the job's nor its call's.
func JobContextIn(ctx context.Context, id int64) (context.Context, bool) {
	if r, ok := RunFrom(ctx); ok && r.ID() == id {
		return ctx, true
	}
	c, ok := ctx.Value(callKey{}).(*callContext)
	if !ok {
		return nil, false
	}
	c.byIDOnce.Do(func() {
		c.byID = make(map[int64]*jobContext, len(c.jobs))
		for _, j := range c.jobs {
			c.byID[j.run.lease.ID] = j
		}
	})
	j, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	return j, true
}

// IsManyCall reports whether ctx is a many-call's context or derived from
// one.
func IsManyCall(ctx context.Context) bool {
	_, ok := ctx.Value(callKey{}).(*callContext)
	return ok
}

// gatheredJob is a job waiting in a group, with the context it will run in.
type gatheredJob struct {
	bufferedJob
	ctx    *jobContext
	cancel context.CancelCauseFunc
}

type groupKey struct{ kind, key string }

// manyGroup is the jobs gathered for one call.
type manyGroup struct {
	groupKey
	rules *ManyRules
	jobs  []gatheredJob
	// flushAt is when the group's call starts if it has not filled: its
	// first job's arrival plus MaxWait.
	flushAt time.Time
}

// gatherer holds a producer's groups; only the producer's run goroutine
// uses it.
type gatherer struct {
	groups map[groupKey]*manyGroup
	jobs   int // jobs in all groups
}

// manyRules returns the rules of row's kind when its handler takes many
// jobs per call, nil otherwise.
func (p *producer) manyRules(row *backend.JobRow) *ManyRules {
	if p.cfg.Many == nil {
		return nil
	}
	return p.cfg.Many(row.Kind)
}

// gather adds j, which holds a worker slot, to its group, after putting it
// in the running set so that its lease is extended while it waits; a group
// that fills starts its call.
func (p *producer) gather(j bufferedJob, rules *ManyRules, now time.Time) {
	row := j.row
	jctx, cancel := newJobContext(p.exec.jobsBase, p.be, row, time.Time{}, 0)
	jctx.running = runningJob{lease: row.Lease(), kind: row.Kind, queue: row.Queue, attempt: int(row.Attempt),
		ctx: jctx, cancel: cancel, gathered: true}
	if p.exec.leaseClock {
		jctx.running.heldUntil = j.claimedAt.Add(p.cfg.LeaseDuration)
	}
	p.exec.running.add(&jctx.running)
	k := groupKey{kind: row.Kind}
	if rules.GroupKey != nil {
		k.key = rules.GroupKey(row)
	}
	if p.groups.groups == nil {
		p.groups.groups = map[groupKey]*manyGroup{}
	}
	g := p.groups.groups[k]
	if g == nil {
		g = &manyGroup{groupKey: k, rules: rules, flushAt: now.Add(rules.MaxWait)}
		p.groups.groups[k] = g
	}
	g.jobs = append(g.jobs, gatheredJob{bufferedJob: j, ctx: jctx, cancel: cancel})
	p.groups.jobs++
	if len(g.jobs) >= max(rules.MaxJobs, 1) {
		p.launch(g)
	}
}

// flushGroups starts the calls of the groups due at now, or of all groups
// when all is set, and returns when the next group left is due (zero:
// none left).
func (p *producer) flushGroups(now time.Time, all bool) (next time.Time) {
	for _, g := range p.groups.groups {
		if all || !now.Before(g.flushAt) {
			p.launch(g)
			continue
		}
		if next.IsZero() || g.flushAt.Before(next) {
			next = g.flushAt
		}
	}
	return next
}

// launch starts g's call on a goroutine of its own; the jobs' slots are
// given back when it returns.
func (p *producer) launch(g *manyGroup) {
	delete(p.groups.groups, g.groupKey)
	p.groups.jobs -= len(g.jobs)
	p.exec.runJob(func() {
		p.exec.runMany(g.kind, g.jobs)
		p.callDone(len(g.jobs))
	})
}

// callDone gives back the slots of a call's n jobs.
func (p *producer) callDone(n int) {
	p.mu.Lock()
	p.running -= n
	p.mu.Unlock()
	p.signalFreed()
}

// releaseGathered hands every gathered job back unstarted (a stop, a
// pause) and gives back their slots.
func (p *producer) releaseGathered() {
	n := 0
	for k, g := range p.groups.groups {
		for _, j := range g.jobs {
			p.out.add(backend.JobFinish{Lease: j.row.Lease(), Outcome: backend.OutcomeRelease})
			j.cancel(nil)
		}
		n += len(g.jobs)
		delete(p.groups.groups, k)
	}
	p.groups.jobs = 0
	if n > 0 {
		p.mu.Lock()
		p.running -= n
		p.mu.Unlock()
	}
}

// launch moves the gathered jobs of a call, started at began with timeout
// (0: none), to running: each gets its start, its deadline and the call.
// It returns those whose context had already ended (lease lost, cancelled,
// a hard stop) or whose known lease has less than half its length left:
// they do not run and go back unstarted.
func (r *runningJobs) launch(jobs []gatheredJob, call *manyCall, began time.Time, timeout, lease time.Duration) (live, dropped []gatheredJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range jobs {
		j := &g.ctx.running
		if j.ctx.Err() != nil || !j.heldUntil.IsZero() && j.heldUntil.Sub(began) < lease/2 {
			dropped = append(dropped, g)
			continue
		}
		j.gathered, j.started, j.timeout, j.call = false, began, timeout, call
		live = append(live, g)
		if d := j.nextExpiry(); !d.IsZero() && (r.timerAt.IsZero() || d.Before(r.timerAt)) {
			r.armLocked(d)
		}
	}
	call.live = len(live)
	return live, dropped
}

// runMany runs one call of kind's handler over jobs, on the calling
// goroutine, and hands each job's outcome to the outcome writer.
func (x *executor) runMany(kind string, jobs []gatheredJob) {
	began := time.Now()
	h, ok := x.cfg.Handler(kind)
	if !ok {
		for _, g := range jobs {
			err := fmt.Errorf("%w %q in this client", ErrUnknownKind, kind)
			x.out.addRun(x.failure(g.row, err, "", x.cfg.NextRetry(int(g.row.Attempt))), g.row.Queue, nil, false)
			g.cancel(nil)
		}
		x.running.dropGathered(jobs)
		return
	}
	timeout := h.Timeout(jobs[0].row)
	if timeout == 0 {
		timeout = x.cfg.JobTimeout
	}
	inner, cancelCall := context.WithCancelCause(x.jobsBase)
	call := &manyCall{cancel: cancelCall}
	cctx := &callContext{Context: inner}
	if timeout > 0 {
		cctx.deadline = began.Add(timeout)
	}
	live, dropped := x.running.launch(jobs, call, began, timeout, x.cfg.LeaseDuration)
	for _, g := range dropped {
		x.out.addRun(backend.JobFinish{Lease: g.row.Lease(), Outcome: backend.OutcomeRelease}, g.row.Queue, nil, true)
		g.cancel(nil)
	}
	defer cancelCall(nil)
	if len(live) == 0 {
		return
	}
	rows := make([]*backend.JobRow, len(live))
	cctx.jobs = make([]*jobContext, len(live))
	for i, g := range live {
		rows[i] = g.row
		g.ctx.run.startedAt = began
		if timeout > 0 {
			g.ctx.deadline = began.Add(timeout)
		}
		cctx.jobs[i] = g.ctx
		x.cfg.Observer.started(g.row, began)
	}
	run := h.RunMany
	if run == nil {
		run = runEach(h.Run)
	}
	errs := safeRunMany(cctx, run, rows)
	took := time.Since(began)
	for i, g := range live {
		row := g.row
		rejectExpected := x.running.handlerDone(row.Lease()) || errors.Is(context.Cause(g.ctx), ErrLeaseLost)
		f := x.outcomeOf(row, &h, errs[i], g.ctx, timeout)
		g.cancel(nil)
		if !rejectExpected {
			x.failures.record(row, &f, took)
		}
		ri := &runInfo{kind: row.Kind, queue: row.Queue, attempt: row.Attempt, maxAttempts: row.MaxAttempts, duration: took}
		if !x.out.addRunOf(row, f, ri, rejectExpected) {
			x.logger.Warn("spool: a job's handler returned after the client's stop gave up waiting for it; its outcome was not written (the stop recorded a retry for the job)",
				"job_id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "outcome", f.Outcome)
		}
	}
}

// dropGathered forgets gathered jobs whose outcome was written without a
// run.
func (r *runningJobs) dropGathered(jobs []gatheredJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range jobs {
		g.ctx.running.gathered = false
	}
}

// runEach works the rows of a call one by one with a single job's run, in
// each job's own context.
func runEach(run func(context.Context, *backend.JobRow) error) func(context.Context, []*backend.JobRow) []error {
	return func(ctx context.Context, rows []*backend.JobRow) []error {
		errs := make([]error, len(rows))
		for i, row := range rows {
			jctx, _ := JobContextIn(ctx, row.ID)
			errs[i] = run(jctx, row)
		}
		return errs
	}
}

// safeRunMany calls run and returns one result per row: a panic, recovered
// with its stack, is every row's result, as is a result list of the wrong
// length.
func safeRunMany(ctx context.Context, run func(context.Context, []*backend.JobRow) []error, rows []*backend.JobRow) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			err := &panicError{value: v, stack: string(debug.Stack())}
			errs = make([]error, len(rows))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	errs = run(ctx, rows)
	if len(errs) != len(rows) {
		err := fmt.Errorf("the handler returned %d results for a call of %d jobs", len(errs), len(rows))
		errs = make([]error, len(rows))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
