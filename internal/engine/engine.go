// Package engine is Spool's worker runtime: what a started client does.
//
// A job's path runs one way: a producer per queue claims jobs in batches
// into a prefetch buffer (producer.go); the executor starts each on a
// goroutine of its own and records it in the running set while it runs
// (executor.go, running.go); its outcome goes to the outcome writer, which
// writes outcomes in batches (outcomes.go). The heartbeat reads the running
// set to extend leases (heartbeat.go); the listener turns the backend's
// wake-ups into producer wake-ups (listen.go). Engine ties them together and
// owns start and stop. Maintenance (leader election, rescue, cleanup) lives
// in package maintenance and runs here as a service.
//
// The package knows jobs only as backend rows and handlers as functions
// (Handler): it does not import package spool.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// Engine works the configured queues of one client.
type Engine struct {
	be     backend.Backend
	cfg    Config
	logger *slog.Logger

	producers map[string]*producer // fixed at New
	// waiting counts the producers with a worker idle (producerEnv.waiting).
	waiting *atomic.Int64
	// router routes wake-ups between processes (route.go); nil when the
	// store cannot or the client does not listen. Set by Start.
	router  *router
	running *runningJobs
	exec    *executor
	out     *outcomeWriter
	beat    *heartbeat

	mu      sync.Mutex
	state   state
	stopped chan struct{} // closed when a stop has finished

	// servicesCtx ends the background services (listener, heartbeat,
	// maintenance) at the end of a stop.
	servicesCtx    context.Context
	servicesCancel context.CancelFunc
	services       sync.WaitGroup
	// hurry is closed by a later stop whose context ended while the first
	// stop still waits: the first one then escalates and gives up as if its
	// own context had ended.
	hurry     chan struct{}
	hurryOnce sync.Once
	// gaveUp is closed when a stop gives up on handlers that ignore their
	// context: producers exit without waiting for them.
	gaveUp chan struct{}
}

type state int

const (
	stateNew state = iota
	stateStarted
	stateStopping
	stateStopped
)

// New returns an engine for cfg over be; it runs nothing until Start.
func New(be backend.Backend, cfg Config, logger *slog.Logger) *Engine {
	e := &Engine{
		be:        be,
		cfg:       cfg,
		logger:    logger,
		producers: map[string]*producer{},
		running:   newRunningJobs(),
		stopped:   make(chan struct{}),
		hurry:     make(chan struct{}),
		gaveUp:    make(chan struct{}),
	}
	e.out = newOutcomeWriter(be, &e.cfg, logger, e.running, e.wakeAt, e.Wake)
	e.beat = newHeartbeat(be, &e.cfg, logger, e.running)
	e.running.leaseEnded = e.beat.leaseEnded
	e.exec = &executor{cfg: &e.cfg, logger: logger, failures: &failureLog{logger: logger}, running: e.running, out: e.out,
		idleRunners: make(chan func()), gaveUp: e.gaveUp, stopped: e.stopped}
	if sc, ok := be.(backend.StallCrediter); !ok || !sc.CreditsStalls() {
		e.exec.leaseClock = true
	}
	if w, ok := be.(backend.OutcomeStepWriter); ok && w.WritesOutcomeSteps() {
		e.exec.stepsWithOutcome = true
	}
	env := &producerEnv{be: be, cfg: &e.cfg, logger: logger, exec: e.exec, out: e.out, gaveUp: e.gaveUp}
	e.waiting = &env.waiting
	for name, q := range cfg.Queues {
		e.producers[name] = newProducer(env, name, q)
	}
	return e
}

// Start checks the schema and starts working the queues. It returns
// backend.ErrSchemaNotMigrated or ErrSchemaTooNew rather than run against a
// schema it does not match. Job contexts carry ctx's values; when ctx ends,
// the engine stops softly, as by Stop.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateNew {
		return ErrAlreadyStarted
	}
	version, err := e.be.SchemaVersion(ctx)
	if err == nil {
		err = version.Check()
	}
	if err != nil {
		return err
	}
	e.servicesCtx, e.servicesCancel = context.WithCancel(context.WithoutCancel(ctx))
	e.exec.jobsBase = context.WithoutCancel(ctx)
	e.state = stateStarted

	e.goService(e.out.run)
	e.goService(func() { e.beat.run(e.servicesCtx) })
	for _, s := range e.cfg.Services {
		e.goService(func() { s(e.servicesCtx) })
	}
	n, ok := e.be.(backend.Notifier)
	if cw, watches := e.be.(backend.CancelWatcher); !ok && watches {
		n, ok = cancelsOnly{cw}, true
	}
	if ok && !e.cfg.PollOnly {
		// Start returns once the subscription is in place, so that a
		// notification sent after Start (a cancellation of a job it is about
		// to run, say) is never missed; if subscribing fails or takes longer
		// than listenStartWait, the client starts anyway and polls meanwhile.
		listening := make(chan struct{})
		var once sync.Once
		l := &listener{n: n, observer: e.cfg.Observer, logger: e.logger, wake: e.wakeJobs, wakeAll: e.WakeAll, cancelled: e.Cancelled, wakeRouted: e.wakeRouted}
		queues := slices.Collect(maps.Keys(e.producers))
		if wr, routes := e.be.(backend.WakeRouter); routes && wr.RoutesWakes() {
			if l.router = newRouter(wr, e.cfg.ClientID, queues, e.logger); l.router != nil {
				e.router = l.router
				for _, p := range e.producers {
					p.router = l.router
				}
				e.goService(func() { l.router.announce(e.servicesCtx) })
			}
		}
		// What the store may use to route its wake-ups (both optional
		// capabilities; nothing for a store without them).
		waiting := e.waiting
		removeQueues := backend.AddWakeQueuesTo(e.be, queues)
		removeDemand := backend.AddWakeDemandTo(e.be, func() bool { return waiting.Load() > 0 })
		e.goService(func() {
			<-e.servicesCtx.Done()
			removeQueues()
			removeDemand()
		})
		e.goService(func() { l.run(e.servicesCtx, func() { once.Do(func() { close(listening) }) }) })
		timer := time.NewTimer(listenStartWait)
		select {
		case <-listening:
		case <-timer.C:
			e.logger.Warn("spool: wake-up subscription not in place yet; starting with polling", "waited", listenStartWait)
		case <-ctx.Done():
		}
		timer.Stop()
	}
	for _, p := range e.producers {
		go p.run()
	}
	context.AfterFunc(ctx, func() { _ = e.Stop(context.Background(), false) })
	e.logger.Info("spool client started", "backend", e.be.Name(), "queues", len(e.producers))
	return nil
}

func (e *Engine) goService(f func()) {
	e.services.Add(1)
	go func() {
		defer e.services.Done()
		f()
	}()
}

// stopGrace is how long a stop whose context has ended still takes, at
// most, counted from the context's deadline: for cancelled handlers to
// return (the first half, handlerGrace), then for the retries of those that
// did not and the outcomes still to write (to the end). Handlers that heed
// their context return within it; outcomes not written by then are
// abandoned and named in the stop's error (their jobs are rescued when
// their leases end).
const (
	stopGrace    = 500 * time.Millisecond
	handlerGrace = stopGrace / 2
)

// Stop stops the engine: no more claims, buffered jobs go back to the queue
// at once, running jobs finish (hard: their contexts are cancelled at once,
// with cause ErrClientStopping) and their outcomes are written. If ctx ends
// first it escalates to a hard stop and waits at most stopGrace more, then
// returns ctx's error, or a *GaveUpError naming the handlers that still ran
// (a retry is recorded for each) and the outcomes it gave up writing. A
// second Stop waits for the first.
func (e *Engine) Stop(ctx context.Context, hard bool) error {
	e.mu.Lock()
	switch e.state {
	case stateNew:
		e.mu.Unlock()
		return ErrNotStarted
	case stateStopping, stateStopped:
		e.mu.Unlock()
		if hard {
			e.running.stopAll(ErrClientStopping)
		}
		select {
		case <-e.stopped:
			return nil
		case <-ctx.Done():
		}
		// Out of time: the first stop gives up on stuck handlers too.
		e.hurryOnce.Do(func() { close(e.hurry) })
		<-e.stopped
		return ctx.Err()
	}
	e.state = stateStopping
	router := e.router
	e.mu.Unlock()
	e.logger.Info("spool client stopping", "hard", hard)
	if router != nil {
		// Wake-ups routed here from now on would wait for another
		// process's poll: the others stop routing here at once.
		go router.leave()
	}

	// Either this stop's context or a later stop's ends the waiting.
	ctxDone := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() { close(ctxDone) })
	defer stopWatch()
	var (
		ctxErr   error
		giveUpAt <-chan time.Time // the end of the current phase's grace
		graceEnd time.Time        // stopGrace after the context ended: the stop's last moment
		timer    *time.Timer
		// writing: the handlers' phase is over; what is left to wait for
		// is outcomes, whose grace runs to graceEnd rather than to
		// handlerGrace after the context ended.
		writing bool
	)
	outOfTime := func() {
		if timer != nil {
			return
		}
		ctxErr = ctx.Err()
		if ctxErr == nil {
			ctxErr = context.Canceled // hurried by a later stop's context
		}
		e.running.stopAll(ErrClientStopping)
		// The grace counts from the deadline, not from when this goroutine
		// saw it pass: a stop promises its deadline plus stopGrace.
		from := time.Now()
		if dl, ok := ctx.Deadline(); ok && dl.Before(from) {
			from = dl
		}
		graceEnd = from.Add(stopGrace)
		end := from.Add(handlerGrace)
		if writing {
			end = graceEnd
		}
		timer = time.NewTimer(time.Until(end))
		giveUpAt = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// wait waits for ch, escalating when the context ends; it reports false
	// once the grace after that has passed too.
	hurry, graceOver := e.hurry, false
	wait := func(ch <-chan struct{}) bool {
		for {
			if graceOver {
				select {
				case <-ch:
					return true
				default:
					return false
				}
			}
			select {
			case <-ch:
				return true
			case <-ctxDone:
				ctxDone = nil
				outOfTime()
			case <-hurry:
				hurry = nil
				outOfTime()
			case <-giveUpAt:
				graceOver = true
			}
		}
	}

	// Producers stop claiming before any job is cancelled: a cancelled job
	// is written back as retryable at once, and a claim still in flight
	// could take it again only to release it. A hard stop waits for those
	// claims (milliseconds) before it cancels.
	for _, p := range e.producers {
		p.stop()
	}
	if hard {
		for _, p := range e.producers {
			wait(p.claimsOver)
		}
		e.running.stopAll(ErrClientStopping)
	}
	var gaveUp *GaveUpError
	for _, p := range e.producers {
		if !wait(p.exited) {
			gaveUp = e.giveUpOnHandlers(ctxErr, graceEnd)
			break
		}
	}
	// The handlers' half of the grace is over (or was not needed): the
	// outcomes still to write have the rest of it, to graceEnd.
	writing = true
	if timer != nil {
		timer.Reset(time.Until(graceEnd))
		giveUpAt, graceOver = timer.C, false
	}
	// Outcomes held for their runs' step records follow them (a batch's
	// write is bounded by its own timeout).
	wait(e.exec.settling.zero())
	// Every job has returned and handed its outcome to the writer (or the
	// stop gave up on it); write them all unless the stop runs out of time,
	// then end the services.
	e.out.close()
	if !wait(e.out.done) {
		e.out.abandon()
		<-e.out.done
	}
	e.out.abandon()
	// Outcomes given up when the grace ended are named in the stop's
	// error: a caller learns that those jobs may still be running under
	// their leases (rescue returns them when the leases end) rather than
	// retried, as a plain context error would have it believe.
	if unwritten := e.out.abandoned(); len(unwritten) > 0 {
		if gaveUp == nil {
			gaveUp = &GaveUpError{Err: ctxErr}
		}
		gaveUp.addUnwritten(unwritten)
	}
	// So are the jobs no write accounted for: outcomes and releases the
	// closed writer refused, claimed jobs a producer that did not exit in
	// time still held, and claims whose jobs the stop never learnt (one in
	// flight may commit after the stop returns). Every one of them stays
	// leased to this client until its lease ends.
	if ctxErr != nil {
		if g := e.leftBehind(ctxErr); g != nil {
			if gaveUp == nil {
				gaveUp = &GaveUpError{Err: ctxErr}
			}
			gaveUp.addUnwritten(g.Unwritten)
			gaveUp.Claims = g.Claims
		}
	}
	// A stop that had time can still leave claims behind: a producer's
	// last release of claims whose reply was lost failed (the store
	// refused it or could not be reached). Their jobs stay leased to this
	// client until their leases end, so the stop says so rather than
	// return nil, which means that nothing stays leased.
	var unreleased *UnreleasedError
	if ctxErr == nil {
		unreleased = e.unreleased()
	}
	e.servicesCancel()
	e.services.Wait()
	e.running.stopAll(ErrClientStopping)

	// A stop already out of time skips the hand-over (leadership, say): it
	// ends by itself.
	if ctxErr == nil && e.cfg.AfterStop != nil {
		e.cfg.AfterStop(ctx)
	}

	e.mu.Lock()
	e.state = stateStopped
	e.mu.Unlock()
	close(e.stopped)
	e.logger.Info("spool client stopped", "hard", hard || ctxErr != nil)
	if gaveUp != nil {
		return gaveUp
	}
	if unreleased != nil {
		return unreleased
	}
	return ctxErr
}

// unreleased collects, for a stop that had time, the claims whose reply was
// lost and whose release the producers could not write on exit; nil when
// there are none.
func (e *Engine) unreleased() *UnreleasedError {
	var u UnreleasedError
	for _, p := range e.producers {
		claims, err := p.unreleased()
		u.Claims = append(u.Claims, claims...)
		if u.Err == nil {
			u.Err = err
		}
	}
	if len(u.Claims) == 0 {
		return nil
	}
	if u.Err == nil {
		u.Err = errors.New("release not written")
	}
	slices.SortFunc(u.Claims, func(a, b ClaimLeft) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.ID, b.ID))
	})
	e.logger.Warn("spool: stop left claims whose reply was lost unreleased; rescue returns their jobs when their leases end",
		"claims", len(u.Claims), "error", u.Err)
	return &u
}

// giveUpOnHandlers ends a stop that ran out of time while handlers that
// ignore their context still run: it records a retry for each of their jobs
// (delayed by one lease, as rescue would have returned them, so the new
// attempt is unlikely to overlap the stuck handler), lets the producers exit
// without waiting for them, and returns the error that names them; the
// write and the producers' exit are bounded by graceEnd, the stop's end.
// Retries it could not write are named in the error's Unwritten; nil when
// there is nothing to name.
func (e *Engine) giveUpOnHandlers(ctxErr error, graceEnd time.Time) *GaveUpError {
	close(e.gaveUp)
	g := &GaveUpError{Err: ctxErr}
	all, toWrite := e.running.stuck()
	if len(toWrite) > 0 {
		finishes := make([]backend.JobFinish, len(toWrite))
		for i, j := range toWrite {
			msg := fmt.Sprintf("interrupted by client stop: the handler had not returned %s after the stop's context ended (it ignores its context); retried after one lease", handlerGrace)
			finishes[i] = backend.JobFinish{Lease: j.lease, Outcome: backend.OutcomeRetry, Delay: e.cfg.LeaseDuration,
				Error: &backend.AttemptError{Attempt: j.attempt, Error: msg}}
		}
		wctx, cancel := context.WithDeadline(context.Background(), graceEnd)
		res, err := e.be.JobFinishMany(wctx, &backend.JobFinishManyParams{Finishes: finishes})
		cancel()
		var unwritten []int64
		switch {
		case err != nil:
			for _, f := range finishes {
				unwritten = append(unwritten, f.Lease.ID)
			}
		case len(res.Unwritten) > 0:
			err = res.Err
			for _, l := range res.Unwritten {
				unwritten = append(unwritten, l.ID)
			}
		}
		if len(unwritten) > 0 {
			e.logger.Warn("spool: could not record the retry of jobs whose handler ignored the stop; rescue returns them when their leases end",
				"jobs", len(unwritten), "error", err)
			g.addUnwritten(unwritten)
		}
	}
	// The producers no longer wait for those handlers; they exit at once.
	exitBy := time.NewTimer(time.Until(graceEnd))
	defer exitBy.Stop()
	for _, p := range e.producers {
		select {
		case <-p.exited:
		case <-exitBy.C:
			e.logger.Warn("spool: a producer did not exit after the stop gave up; the jobs it holds are named in the stop's error and rescued when their leases end", "queue", p.queue)
		}
	}
	now := time.Now()
	for _, j := range all {
		g.Jobs = append(g.Jobs, StuckJob{ID: j.lease.ID, Kind: j.kind, Attempt: j.attempt, Running: now.Sub(j.started)})
	}
	slices.SortFunc(g.Jobs, func(a, b StuckJob) int { return cmp.Compare(a.ID, b.ID) })
	// A producer can miss the handlers' half of the grace with no handler
	// stuck, held by a claim in flight: the stop names that claim once the
	// outcomes are written (leftBehind), not here.
	if len(g.Jobs) == 0 && len(g.Unwritten) == 0 {
		return nil
	}
	e.logger.Warn("spool: stop gave up on jobs whose handler ignores its context; their goroutines run on until the handlers return",
		"jobs", len(g.Jobs), "error", g.Error())
	return g
}

// leftBehind collects, for a stop out of time whose outcome writer is done,
// the jobs still leased to this client that no write accounted for and the
// claims whose jobs it does not know (see Stop); nil when there are none.
func (e *Engine) leftBehind(ctxErr error) *GaveUpError {
	g := &GaveUpError{Err: ctxErr}
	ids := e.running.unsettled()
	for _, p := range e.producers {
		jobs, claims := p.leftBehind()
		ids = append(ids, jobs...)
		g.Claims = append(g.Claims, claims...)
	}
	if len(ids) == 0 && len(g.Claims) == 0 {
		return nil
	}
	g.addUnwritten(ids)
	slices.SortFunc(g.Claims, func(a, b ClaimLeft) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.ID, b.ID))
	})
	e.logger.Warn("spool: stop gave up on jobs still leased to this client; rescue returns them when their leases end",
		"jobs", len(g.Unwritten), "claims", len(g.Claims))
	return g
}

// Stopped returns a channel closed when a stop has completed.
func (e *Engine) Stopped() <-chan struct{} { return e.stopped }

// CompletedInTx records that the handler of the job under this lease completed
// it in its own transaction (spool.CompleteTx): the store is expected to
// fence out the engine's own outcome for it, and a heartbeat that finds its
// lease gone is no news.
func (e *Engine) CompletedInTx(lease backend.LeaseRef) { e.running.markCompletedInTx(lease) }

// Wake wakes this process's producer of queue, if it works it.
func (e *Engine) Wake(queue string) {
	if p, ok := e.producers[queue]; ok {
		p.wake()
	}
}

// Cancelled tells the engine that job id was cancelled (0: some jobs, by
// a filter or a workflow), by this process or, through the cancellation's
// wake-up, by another: if it runs one of them here, a heartbeat goes at
// once, which finds the lease gone and cancels the handler. The store's
// wake-up can take a while to come back to the process that sent it
// (MariaDB's reads of the cancellation events, every 200 ms while jobs
// come), so this process's own cancels call it directly.
func (e *Engine) Cancelled(id int64) {
	if (id == 0 && e.running.any()) || (id != 0 && e.running.holds(id)) {
		e.beat.now()
	}
}

// Paused tells the producer of queue, if any, that the queue was paused in
// this process: it hands its prefetched jobs back at once. Producers in
// other processes find the pause at their next poll.
func (e *Engine) Paused(queue string) {
	if p, ok := e.producers[queue]; ok {
		p.paused()
	}
}

// wakeRouted wakes this process's producer of queue for a routed wake-up
// passed on hops times, announcing jobs (nil: not listed).
func (e *Engine) wakeRouted(queue string, hops int, jobs []int64) {
	if p, ok := e.producers[queue]; ok {
		p.wakeRouted(hops, jobs)
	}
}

// wakeJobs wakes this process's producer of queue for a wake-up listing
// jobs (nil: not listed, a plain wake-up).
func (e *Engine) wakeJobs(queue string, jobs []int64) {
	if p, ok := e.producers[queue]; ok {
		p.wakeJobs(jobs)
	}
}

// WakeAll wakes every producer.
func (e *Engine) WakeAll() {
	for _, p := range e.producers {
		p.wake()
	}
}

// wakeAt asks queue's producer to look again at t.
func (e *Engine) wakeAt(queue string, t time.Time) {
	if p, ok := e.producers[queue]; ok {
		p.wakeAt(t)
	}
}

// WakeInserted wakes this process's producers of the queues rows went to,
// so a job inserted here starts without waiting for a notification or a
// poll; a delayed job sets a wake-up for when it is due.
func (e *Engine) WakeInserted(rows []*backend.JobInsertParams) {
	now := time.Now()
	last := ""
	for _, r := range rows {
		p, ok := e.producers[r.Queue]
		if !ok {
			continue
		}
		switch {
		case r.RunAt != nil && r.RunAt.After(now):
			p.wakeAt(*r.RunAt)
		case r.Delay > 0:
			p.wakeAt(now.Add(r.Delay))
		case r.Queue != last:
			last = r.Queue
			p.wake()
		}
	}
}

// RunOne claims the next due job of queue and runs it on the calling
// goroutine as a worker would (handler, timeout, outcome), then writes its
// outcome. It returns the job as claimed, nil when none was due. No
// heartbeat extends its lease unless the engine is started, so the handler
// should take less than LeaseDuration: its context is cancelled (cause
// ErrLeaseLost) when the lease ends. For tests and tools.
func (e *Engine) RunOne(ctx context.Context, queue string) (*backend.JobRow, error) {
	sentAt := time.Now()
	rows, err := e.be.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, Max: 1, Lease: e.cfg.LeaseDuration,
		ClaimID: e.cfg.ClientID + "#one-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	if err != nil {
		return nil, fmt.Errorf("run one job: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	row := rows[0]
	began := time.Now()
	f, rejectExpected, settled, take := e.exec.executeIn(ctx, row, sentAt, time.Now())
	if settled != nil {
		<-settled
	}
	if take != nil {
		f.Steps = take()
	}
	took := time.Since(began)
	defer e.running.remove([]backend.LeaseRef{row.Lease()})
	if !rejectExpected {
		e.exec.failures.record(row, &f, took)
	}
	res, err := e.be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{f}, DeleteCompleted: e.cfg.DeleteCompleted})
	if err == nil {
		err = res.Incomplete()
	}
	if err != nil {
		return row, fmt.Errorf("run one job: write the outcome of job %d: %w", row.ID, err)
	}
	if len(res.Rejected) == 0 && e.cfg.Outcome != nil {
		e.cfg.Outcome(Outcome{Result: ResultOf(&f, row.Attempt, row.MaxAttempts), Finish: f, Kind: row.Kind, Queue: row.Queue, Attempt: row.Attempt, MaxAttempts: row.MaxAttempts, Duration: took})
	}
	return row, nil
}
