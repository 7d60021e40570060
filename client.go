package spool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// Client inserts jobs and, once started, works them.
type Client struct {
	backend backend.Backend
	config  Config
	logger  *slog.Logger

	producers map[string]*producer // fixed at NewClient

	mu      sync.Mutex
	state   clientState
	stopped chan struct{} // closed when a stop has finished

	// servicesCtx ends the background services (listener, heartbeat,
	// maintenance) at the end of a stop.
	servicesCtx    context.Context
	servicesCancel context.CancelFunc
	// jobsCtx is the parent of every job context; a hard stop cancels it.
	jobsCtx    context.Context
	jobsCancel context.CancelCauseFunc

	completer *completer
	running   runningJobs
	// idleRunners hands a job to a goroutine waiting for one (runJob).
	idleRunners chan func()
	services    sync.WaitGroup
	claimSeq    atomic.Uint64 // numbers claim calls, for their ClaimIDs
	// beatNow asks the heartbeat loop for an immediate beat (capacity 1).
	beatNow chan struct{}
	// hurry is closed by a later stop whose context ended while the first
	// stop still waits: the first one then escalates and gives up as if its
	// own context had ended.
	hurry     chan struct{}
	hurryOnce sync.Once
	// gaveUp is closed when a stop gives up on handlers that ignore their
	// context: producers exit without waiting for them.
	gaveUp chan struct{}
}

type clientState int

const (
	stateNew clientState = iota
	stateStarted
	stateStopping
	stateStopped
)

// NewClient returns a client over a backend. A client with no Workers or
// Queues can insert but not Start.
func NewClient(be backend.Backend, config *Config) (*Client, error) {
	if be == nil {
		return nil, fmt.Errorf("new client: %w: nil backend", ErrInvalidConfig)
	}
	cfg := Config{}
	if config != nil {
		cfg = *config
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	c := &Client{
		backend:     be,
		config:      cfg,
		logger:      cfg.Logger.With("spool_client", cfg.ClientID),
		producers:   map[string]*producer{},
		stopped:     make(chan struct{}),
		idleRunners: make(chan func()),
		beatNow:     make(chan struct{}, 1),
		hurry:       make(chan struct{}),
		gaveUp:      make(chan struct{}),
	}
	for name, q := range cfg.Queues {
		c.producers[name] = newProducer(c, name, q)
	}
	c.running.jobs = map[int64]*runningJob{}
	return c, nil
}

// ID returns the client's id, as recorded in leases.
func (c *Client) ID() string { return c.config.ClientID }

// Backend returns the client's backend.
func (c *Client) Backend() backend.Backend { return c.backend }

// Start checks the schema and starts working the configured queues. It
// returns ErrSchemaNotMigrated or ErrSchemaTooNew rather than run against a
// schema it does not match. When ctx ends, the client stops softly, as by Stop.
func (c *Client) Start(ctx context.Context) error {
	if c.config.Workers == nil || len(c.producers) == 0 {
		return fmt.Errorf("start client: %w", ErrNoWorkers)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateNew {
		return fmt.Errorf("start client: %w", ErrAlreadyStarted)
	}
	version, err := c.backend.SchemaVersion(ctx)
	if err == nil {
		err = version.Check()
	}
	if err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	c.servicesCtx, c.servicesCancel = context.WithCancel(context.WithoutCancel(ctx))
	c.jobsCtx, c.jobsCancel = context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), clientKey{}, c))
	c.completer = newCompleter(c)
	c.state = stateStarted

	c.goService(c.completer.run)
	c.goService(c.heartbeatLoop)
	c.goService(c.maintenanceLoop)
	if n, ok := c.backend.(backend.Notifier); ok && !c.config.PollOnly {
		// Start returns once the subscription is in place, so that a
		// notification sent after Start (a cancellation of a job it is about
		// to run, say) is never missed; if subscribing fails or takes longer
		// than listenStartWait, the client starts anyway and polls meanwhile.
		listening := make(chan struct{})
		var once sync.Once
		c.goService(func() { c.listenLoop(n, func() { once.Do(func() { close(listening) }) }) })
		timer := time.NewTimer(listenStartWait)
		select {
		case <-listening:
		case <-timer.C:
			c.logger.Warn("spool: wake-up subscription not in place yet; starting with polling", "waited", listenStartWait)
		case <-ctx.Done():
		}
		timer.Stop()
	}
	for _, p := range c.producers {
		go p.run()
	}
	context.AfterFunc(ctx, func() { _ = c.Stop(context.Background()) })
	c.logger.Info("spool client started", "backend", c.backend.Name(), "queues", len(c.producers))
	return nil
}

func (c *Client) goService(f func()) {
	c.services.Add(1)
	go func() {
		defer c.services.Done()
		f()
	}()
}

// Stop stops softly: no more claims, buffered jobs go back to the queue at
// once, running jobs finish and their outcomes are written. If ctx ends first
// it escalates to a hard stop (as StopAndCancel): running jobs' contexts are
// cancelled and Stop waits at most stopGrace (half a second) more for their
// handlers to return and their outcomes to be written, then returns ctx's
// error. Handlers still running then ignore their context: Stop records a
// retry for each of their jobs and returns a *StopTimeoutError naming them,
// without waiting for them (see StopTimeoutError).
func (c *Client) Stop(ctx context.Context) error { return c.stop(ctx, false) }

// StopAndCancel stops hard: running jobs' contexts are cancelled at once (with
// cause ErrClientStopping) and their attempts are recorded as failed and
// retried; buffered jobs go back to the queue. It returns when ctx ends as
// Stop does.
func (c *Client) StopAndCancel(ctx context.Context) error { return c.stop(ctx, true) }

// stopGrace is how long a stop whose context has ended still waits for
// cancelled handlers to return and for outcomes to be written. Handlers that
// heed their context return within it; outcomes not written by then are
// abandoned (their jobs are rescued when their leases end).
const stopGrace = 500 * time.Millisecond

func (c *Client) stop(ctx context.Context, hard bool) error {
	c.mu.Lock()
	switch c.state {
	case stateNew:
		c.mu.Unlock()
		return fmt.Errorf("stop client: %w", ErrNotStarted)
	case stateStopping, stateStopped:
		c.mu.Unlock()
		if hard {
			c.jobsCancel(ErrClientStopping)
		}
		select {
		case <-c.stopped:
			return nil
		case <-ctx.Done():
		}
		// Out of time: the first stop gives up on stuck handlers too.
		c.hurryOnce.Do(func() { close(c.hurry) })
		<-c.stopped
		return ctx.Err()
	}
	c.state = stateStopping
	c.mu.Unlock()
	c.logger.Info("spool client stopping", "hard", hard)

	// Either this stop's context or a later stop's ends the waiting.
	ctxDone := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() { close(ctxDone) })
	defer stopWatch()
	var (
		ctxErr   error
		giveUpAt <-chan time.Time // stopGrace after the context ended
		timer    *time.Timer
	)
	outOfTime := func() {
		if timer != nil {
			return
		}
		ctxErr = ctx.Err()
		if ctxErr == nil {
			ctxErr = context.Canceled // hurried by a later stop's context
		}
		c.jobsCancel(ErrClientStopping)
		timer = time.NewTimer(stopGrace)
		giveUpAt = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// wait waits for ch, escalating when the context ends; it reports false
	// once the grace after that has passed too.
	hurry, graceOver := c.hurry, false
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
	for _, p := range c.producers {
		p.stop()
	}
	if hard {
		for _, p := range c.producers {
			wait(p.claimsOver)
		}
		c.jobsCancel(ErrClientStopping)
	}
	var stopErr error
	for _, p := range c.producers {
		if !wait(p.exited) {
			stopErr = c.giveUpOnHandlers(ctxErr)
			break
		}
	}
	// Every job has returned and handed its outcome to the completer (or
	// the stop gave up on it); write them all unless the stop runs out of
	// time, then end the services.
	c.completer.close()
	if !wait(c.completer.done) {
		c.completer.abandon()
		<-c.completer.done
	}
	c.completer.abandon()
	c.servicesCancel()
	c.services.Wait()
	c.jobsCancel(ErrClientStopping)

	// Hand leadership over at once; a stop already out of time skips it, as
	// the term ends by itself (its TTL is the larger of LeaseDuration and 5 s).
	if ctxErr == nil {
		resignCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.backend.LeaderResign(resignCtx, &backend.LeaderResignParams{Name: leaderName, ClientID: c.config.ClientID}); err != nil {
			c.logger.Warn("spool: resign leadership", "error", err)
		}
		cancel()
	}

	c.mu.Lock()
	c.state = stateStopped
	c.mu.Unlock()
	close(c.stopped)
	c.logger.Info("spool client stopped", "hard", hard || ctxErr != nil)
	if stopErr != nil {
		return stopErr
	}
	return ctxErr
}

// giveUpOnHandlers ends a stop that ran out of time while handlers that
// ignore their context still run: it records a retry for each of their jobs
// (delayed by one lease, as rescue would have returned them, so the new
// attempt is unlikely to overlap the stuck handler), lets the producers exit
// without waiting for them, and returns the error that names them.
func (c *Client) giveUpOnHandlers(ctxErr error) error {
	close(c.gaveUp)
	all, toWrite := c.running.stuck()
	if len(toWrite) > 0 {
		finishes := make([]backend.JobFinish, len(toWrite))
		for i, j := range toWrite {
			msg := fmt.Sprintf("interrupted by client stop: the handler had not returned %s after the stop's context ended (it ignores its context); retried after one lease", stopGrace)
			finishes[i] = backend.JobFinish{Lease: j.lease, Outcome: backend.OutcomeRetry, Delay: c.config.LeaseDuration,
				Error: &backend.AttemptError{Attempt: j.attempt, Error: msg}}
		}
		wctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		if _, err := c.backend.JobFinishMany(wctx, &backend.JobFinishManyParams{Finishes: finishes}); err != nil {
			c.logger.Warn("spool: could not record the retry of jobs whose handler ignored the stop; rescue returns them when their leases end",
				"jobs", len(finishes), "error", err)
		}
		cancel()
	}
	// The producers no longer wait for those handlers; they exit at once.
	exitBy := time.NewTimer(stopGrace)
	defer exitBy.Stop()
	for _, p := range c.producers {
		select {
		case <-p.exited:
		case <-exitBy.C:
			c.logger.Warn("spool: a producer did not exit after the stop gave up; its buffered jobs are rescued when their leases end", "queue", p.queue)
		}
	}
	e := &StopTimeoutError{Err: ctxErr}
	now := time.Now()
	for _, j := range all {
		e.Jobs = append(e.Jobs, StuckJob{ID: j.lease.ID, Kind: j.kind, Attempt: j.attempt, Running: now.Sub(j.started)})
	}
	slices.SortFunc(e.Jobs, func(a, b StuckJob) int { return cmp.Compare(a.ID, b.ID) })
	c.logger.Warn("spool: stop gave up on jobs whose handler ignores its context; their goroutines run on until the handlers return",
		"jobs", len(e.Jobs), "error", e.Error())
	return e
}

// Stopped returns a channel closed when a stop has completed.
func (c *Client) Stopped() <-chan struct{} { return c.stopped }

// wakeLocal wakes this process's producers of the queues rows went to, so a
// job inserted here starts without waiting for a notification or a poll; a
// delayed job sets a wake-up for when it is due.
func (c *Client) wakeLocal(rows []*backend.JobInsertParams) {
	now := time.Now()
	last := ""
	for _, r := range rows {
		p, ok := c.producers[r.Queue]
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

// listenStartWait bounds how long Start waits for the wake-up subscription.
const listenStartWait = 5 * time.Second

// listenLoop keeps a wake-up subscription, reconnecting with jittered backoff.
// settled is called once the first subscription is in place or the first
// attempt has failed.
func (c *Client) listenLoop(n backend.Notifier, settled func()) {
	defer settled()
	ctx := c.servicesCtx
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := n.Listen(ctx, func() {
			settled()
			// Anything inserted while we were not listening: look now.
			for _, p := range c.producers {
				p.wake()
			}
		}, func(w backend.Wake) {
			if w.CancelledID != 0 {
				if c.running.holds(w.CancelledID) {
					c.heartbeatNow()
				}
				return
			}
			if w.Queue == "" {
				for _, p := range c.producers {
					p.wake()
				}
				return
			}
			if p, ok := c.producers[w.Queue]; ok {
				p.wake()
			}
		})
		settled()
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		c.logger.Warn("spool: wake-up listener stopped; polling until it reconnects", "error", err, "retry_in", backoff)
		if !sleepCtx(ctx, jitter(backoff)) {
			return
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// jitter spreads d over [d/2, d).
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// sleepCtx waits for d or ctx, reporting whether the full time passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// clientKey carries the client in job contexts.
type clientKey struct{}

// ClientFromContext returns the client running the job whose context this is.
func ClientFromContext(ctx context.Context) (*Client, bool) {
	c, ok := ctx.Value(clientKey{}).(*Client)
	return c, ok
}

// CompleteTx marks a running job completed inside the caller's transaction,
// so the job's effects and its completion commit or roll back together. ctx
// must be the job's context (it carries the client). It returns ErrLeaseLost
// if the job's lease no longer holds; the caller should then roll back.
// After a commit, the worker's own result for the job is ignored.
func CompleteTx[T JobArgs](ctx context.Context, tx any, job *Job[T]) error {
	c, ok := ClientFromContext(ctx)
	if !ok {
		return errors.New("complete job in tx: context is not a spool job context")
	}
	if tx == nil {
		return fmt.Errorf("complete job %d in tx: %w: nil transaction", job.ID, ErrTxType)
	}
	res, err := c.backend.JobFinishMany(ctx, &backend.JobFinishManyParams{
		Tx:              tx,
		Finishes:        []backend.JobFinish{{Lease: job.Lease(), Outcome: backend.OutcomeComplete}},
		DeleteCompleted: c.config.CompletedRetention < 0,
	})
	if err != nil {
		return fmt.Errorf("complete job %d in tx: %w", job.ID, err)
	}
	if len(res.Rejected) > 0 {
		return fmt.Errorf("complete job %d in tx: %w", job.ID, ErrLeaseLost)
	}
	c.running.markCompletedInTx(job.ID)
	return nil
}
