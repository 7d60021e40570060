package spool

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/maintenance"
)

// Client inserts jobs and, once started, works them. The work itself is
// done by the engine (internal/engine) and, for the elected leader, by
// maintenance (internal/maintenance); Client holds the configuration, the
// insert and admin API, and hands start and stop to them.
type Client struct {
	backend backend.Backend
	config  Config
	engine  *engine.Engine
	events  subscriptions
	// feed tells Await and SubscribeAll of finished jobs (await.go).
	feed finishFeed
	// observers are cfg.Observers.
	observers observers
	// steps group-commits the step records of the client's jobs (step.go).
	steps stepBatcher
}

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
	c := &Client{backend: be, config: cfg, observers: observers(cfg.Observers)}
	if a, ok := be.(backend.FinishAnnouncer); ok && cfg.AnnounceFinishes {
		c.feed.announcer = a
	}
	hooks := c.observers.engine()
	logger := cfg.Logger.With("spool_client", cfg.ClientID)
	c.events.logger = logger
	keeper := maintenance.New(be, maintenance.Config{
		ClientID:           cfg.ClientID,
		LeaseDuration:      cfg.LeaseDuration,
		RescueInterval:     cfg.RescueInterval,
		CleanupInterval:    cfg.CleanupInterval,
		CompletedRetention: cfg.CompletedRetention,
		DiscardedRetention: cfg.DiscardedRetention,
		CancelledRetention: cfg.CancelledRetention,
		Rescued:            hooks.RescuedFunc(),
	}, logger)
	services := []func(context.Context){keeper.Run}
	if fire := c.periodicService(keeper.Leading, keeper.Won()); fire != nil {
		services = append(services, fire)
	}
	outcome := func(o engine.Outcome) {
		c.feed.local(o)
		c.events.outcome(o)
	}
	if len(c.observers) > 0 {
		outcome = func(o engine.Outcome) {
			c.observers.finished(o)
			c.feed.local(o)
			c.events.outcome(o)
		}
	}
	queues := make(map[string]engine.Queue, len(cfg.Queues))
	for name, q := range cfg.Queues {
		rules, _ := checkFlow(q.Flow) // checked by withDefaults
		queues[name] = engine.Queue{MaxWorkers: q.MaxWorkers, Prefetch: q.Prefetch, Flow: rules}
	}
	c.engine = engine.New(be, engine.Config{
		ClientID:           cfg.ClientID,
		LeaseDuration:      cfg.LeaseDuration,
		PollInterval:       cfg.PollInterval,
		FlowPollInterval:   cfg.FlowPollInterval,
		PollOnly:           cfg.PollOnly,
		CompletionBatchMax: cfg.CompletionBatchMax,
		CompletionDelay:    cfg.CompletionDelay,
		JobTimeout:         cfg.JobTimeout,
		DeleteCompleted:    cfg.CompletedRetention < 0,
		Queues:             queues,
		Handler:            c.handler,
		Many:               cfg.Workers.manyRules,
		Outcome:            outcome,
		Observer:           hooks,
		NextRetry:          cfg.RetryPolicy.NextRetry,
		Services:           services,
		AfterStop:          keeper.Resign,
	}, logger)
	return c, nil
}

// ID returns the client's id, as recorded in leases.
func (c *Client) ID() string { return c.config.ClientID }

// Backend returns the client's backend.
func (c *Client) Backend() backend.Backend { return c.backend }

// Start checks the schema and starts working the configured queues. A
// client without Workers or Queues returns ErrNoWorkers, naming the
// Config field to fill. It returns ErrSchemaNotMigrated or ErrSchemaTooNew
// rather than run against a schema it does not match (Insert returns the
// same on a store not migrated). When the store cannot be reached for the check
// in a way that may pass by itself (ErrUnavailable: the database restarting
// as the worker starts), Start logs the failure and tries again with
// backoff until ctx ends, as backend.Open does. When ctx ends after Start
// returned, the client stops softly, as by Stop.
func (c *Client) Start(ctx context.Context) error {
	switch {
	case c.config.Workers == nil && len(c.config.Queues) == 0:
		return fmt.Errorf("start client: %w: Config.Workers is nil and Config.Queues is empty: "+
			"register the kinds this client works (spool.NewWorkers, spool.AddWorker) and name its queues "+
			"(Queues: map[string]spool.QueueConfig{%q: {MaxWorkers: 10}})", ErrNoWorkers, DefaultQueue)
	case c.config.Workers == nil:
		return fmt.Errorf("start client: %w: Config.Workers is nil: "+
			"register the kinds this client works with spool.NewWorkers and spool.AddWorker", ErrNoWorkers)
	case len(c.config.Queues) == 0:
		return fmt.Errorf("start client: %w: Config.Queues is empty: name the queues this client works, "+
			"with their concurrency (Queues: map[string]spool.QueueConfig{%q: {MaxWorkers: 10}}; "+
			"jobs go to %q unless their InsertOpts.Queue says otherwise)", ErrNoWorkers, DefaultQueue, DefaultQueue)
	}
	ctx = context.WithValue(ctx, clientKey{}, c)
	_, err := backend.WhileUnavailable(ctx, c.events.logger, "spool: cannot start yet: the store is unavailable; trying again", nil, func() error {
		return c.engine.Start(ctx)
	})
	if err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	return nil
}

// Stop stops softly: no more claims, buffered jobs go back to the queue at
// once, running jobs finish and their outcomes are written. If ctx ends first
// it escalates to a hard stop (as StopAndCancel): running jobs' contexts are
// cancelled and Stop waits at most half a second more for their handlers to
// return and their outcomes to be written, then returns ctx's error.
// Handlers still running then ignore their context: Stop records a retry for
// each of their jobs and returns a *StopTimeoutError naming them, without
// waiting for them. Outcomes it could not write by then are named in the
// error too (StopTimeoutError.Unwritten), and so are claims whose reply
// never came (StopTimeoutError.Claims: their jobs are unknown): those jobs
// are rescued when their leases end, but those of a claim in flight, which
// are released when its reply comes. A plain ctx error means every outcome
// was written and no job stays leased to the client. A stop whose context
// did not end returns nil, or a *StopUnreleasedError naming the claims
// whose reply was lost and whose release failed.
func (c *Client) Stop(ctx context.Context) error { return c.stop(ctx, false) }

// StopAndCancel stops hard: running jobs' contexts are cancelled at once (with
// cause ErrClientStopping) and their attempts are recorded as failed and
// retried; buffered jobs go back to the queue. It returns when ctx ends as
// Stop does.
func (c *Client) StopAndCancel(ctx context.Context) error { return c.stop(ctx, true) }

func (c *Client) stop(ctx context.Context, hard bool) error {
	err := c.engine.Stop(ctx, hard)
	var (
		g *engine.GaveUpError
		u *engine.UnreleasedError
	)
	switch {
	case errors.As(err, &u):
		e := &StopUnreleasedError{Err: u.Err}
		for _, c := range u.Claims {
			e.Claims = append(e.Claims, StopClaim(c))
		}
		return e
	case errors.As(err, &g):
		e := &StopTimeoutError{Err: g.Err, Unwritten: g.Unwritten}
		for _, j := range g.Jobs {
			e.Jobs = append(e.Jobs, StuckJob(j))
		}
		for _, c := range g.Claims {
			e.Claims = append(e.Claims, StopClaim(c))
		}
		return e
	case errors.Is(err, ErrNotStarted):
		return fmt.Errorf("stop client: %w", err)
	}
	return err
}

// PeriodicJobs returns the periodic jobs of the client's config (for
// dashboards); the slice is the client's own, not to be changed.
func (c *Client) PeriodicJobs() []PeriodicJob { return c.config.PeriodicJobs }

// PeriodicRecords lists the periodic jobs recorded in the store by the
// leaders of its clients, by name: what a process without the PeriodicJobs
// config (the spool command, a dashboard of its own) can show. A record
// whose SeenAt is older than PeriodicStaleAfter is declared by no leader.
func (c *Client) PeriodicRecords(ctx context.Context) ([]PeriodicRecord, error) {
	return c.backend.PeriodicList(ctx)
}

// QueueConfigs returns the queues the client works, by name, as configured.
func (c *Client) QueueConfigs() map[string]QueueConfig { return maps.Clone(c.config.Queues) }

// Stopped returns a channel closed when a stop has completed.
func (c *Client) Stopped() <-chan struct{} { return c.engine.Stopped() }

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
// After a commit, the worker's own result for the job is ignored. The
// records of the run's durable steps written behind are written first, as
// before the worker's own outcome: a completed job shows every step its
// run recorded.
func CompleteTx[T JobArgs](ctx context.Context, tx any, job *Job[T]) error {
	c, ok := ClientFromContext(ctx)
	if !ok {
		return errors.New("complete job in tx: context is not a spool job context")
	}
	if tx == nil {
		return fmt.Errorf("complete job %d in tx: %w: nil transaction", job.ID, ErrTxType)
	}
	durable := false
	if run, ok := engine.RunFrom(ctx); ok && run.UsedDurable() {
		durable = true
		s, err := durableRun(ctx, "complete job in tx", "")
		if err != nil {
			return err
		}
		// A record still queued or in flight would otherwise be written
		// after the completion committed, and refused: the lease ended.
		if err := s.settle(ctx); err != nil {
			return fmt.Errorf("complete job %d in tx: %w", job.ID, err)
		}
	}
	res, err := c.backend.JobFinishMany(ctx, &backend.JobFinishManyParams{
		Tx:              tx,
		Finishes:        []backend.JobFinish{{Lease: job.Lease(), Outcome: backend.OutcomeComplete, Durable: durable}},
		DeleteCompleted: c.config.CompletedRetention < 0,
	})
	if err == nil {
		err = res.Incomplete()
	}
	if err != nil {
		return fmt.Errorf("complete job %d in tx: %w", job.ID, err)
	}
	if len(res.Rejected) > 0 {
		return fmt.Errorf("complete job %d in tx: %w", job.ID, ErrLeaseLost)
	}
	c.engine.CompletedInTx(job.Lease())
	return nil
}

// handler returns the handler of kind with the client's work middleware.
func (c *Client) handler(kind string) (engine.Handler, bool) {
	h, ok := c.config.Workers.handler(kind)
	if !ok {
		return h, false
	}
	return wrapHandler(h, c.config.WorkMiddleware), true
}
