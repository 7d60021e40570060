package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

// ScenarioRun is one invocation of a scenario, from its flags to its output.
// A scenario's Run makes one, adds its own flags to fs, calls parse, then
// check with its own conditions, then begin; it opens scratch stores with openStore, draws
// progress with progress, logs through logger, and ends with finish. It
// holds what every scenario used to repeat: the common flags, their checks,
// the --timeout bound, the CPU profile, the store's life, the shared stderr
// and the JSON, table and chart output.
type ScenarioRun struct {
	Name   string // "bench drain", in errors and usage errors
	Env    *cli.Env
	Flags  *flag.FlagSet
	Common *Common
	plot   *string // --plot FILE
	// strategy is --strategy, for scenarios that offer it (withStrategy).
	strategy *string
	// Stderr is shared by progress and client logs, which write from
	// several goroutines.
	Stderr *LockedWriter
	// ends run at the end of the run, last registered first.
	ends []func()
}

// NewScenarioRun starts a run of the command called name, as typed after
// the binary's name ("bench drain"; "chaos" in the lab), with the common
// flags and --plot.
func NewScenarioRun(env *cli.Env, name string) *ScenarioRun {
	r := &ScenarioRun{Name: name, Env: env, Stderr: &LockedWriter{W: env.Stderr}}
	r.Flags = flag.NewFlagSet(r.Name, flag.ContinueOnError)
	r.Common = AddCommon(r.Flags)
	r.plot = addPlotFlag(r.Flags)
	return r
}

// withStrategy adds --strategy (the claim strategy, as the spool_claim URL
// parameter sets it).
func (r *ScenarioRun) withStrategy() *ScenarioRun {
	r.strategy = r.Flags.String("strategy", "", "claim strategy: pessimistic or optimistic (default: the backend's)")
	return r
}

// Check is one condition a scenario's flags must meet.
type Check struct {
	ok  bool
	msg string
}

// Want is a check: ok, or the usage error msg.
func Want(ok bool, format string, args ...any) Check {
	return Check{ok: ok, msg: fmt.Sprintf(format, args...)}
}

// Parse parses args and refuses positional arguments. Then call check.
func (r *ScenarioRun) Parse(args []string, usage string) error {
	pos, err := cli.ParseFlags(r.Flags, args, usage)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef(r.Name, "unexpected argument %q", pos[0])
	}
	return nil
}

// Check checks, once the flags are parsed, the scenario's own conditions in
// order and then the common flags (--timeout, --strategy, --plot). The
// first that fails is the usage error; nothing has been touched then.
func (r *ScenarioRun) Check(checks ...Check) error {
	for _, c := range checks {
		if !c.ok {
			return cli.Usagef(r.Name, "%s", c.msg)
		}
	}
	if *r.Common.Timeout < 0 {
		return cli.Usagef(r.Name, "--timeout must not be negative")
	}
	if r.strategy != nil {
		if err := applyStrategyFlag(r.Common, *r.strategy); err != nil {
			return cli.Usagef(r.Name, "%v", err)
		}
	}
	return checkPlotPath(r.Name, *r.plot)
}

// Begin bounds ctx by --timeout. Call end when the run is over (deferred).
func (r *ScenarioRun) Begin(ctx context.Context) context.Context {
	ctx, cancel := r.Common.withTimeout(ctx, r.Name)
	r.AtEnd(cancel)
	return ctx
}

// AtEnd registers f to run at the end of the run.
func (r *ScenarioRun) AtEnd(f func()) { r.ends = append(r.ends, f) }

// End runs what the run registered, last first: stopping clients before
// their stores are dropped, and the store before the timeout is released.
func (r *ScenarioRun) End() {
	for i := len(r.ends) - 1; i >= 0; i-- {
		r.ends[i]()
	}
	r.ends = nil
}

// StartProfile starts the --cpuprofile profile, if asked for, until the
// end of the run: call it where the measured phase begins.
func (r *ScenarioRun) StartProfile() error {
	stop, err := r.Common.startCPUProfile()
	if err != nil {
		return err
	}
	r.AtEnd(stop)
	return nil
}

// openStore opens a migrated scratch store that lives until the end of the
// run, when it is dropped (unless --keep); a failure to drop it is reported
// on stderr.
func (r *ScenarioRun) openStore(ctx context.Context) (*Store, error) {
	store, err := OpenStore(ctx, r.Env, r.Common)
	if err != nil {
		return nil, err
	}
	r.AtEnd(func() {
		if cerr := store.Close(); cerr != nil {
			fmt.Fprintf(r.Env.Stderr, "spool: %v\n", cerr)
		}
	})
	return store, nil
}

// OpenStoreFor opens a scratch store for one part of a run (a cell of
// bench insert, a backlog of bench scale); close drops it and returns the
// error, if any.
func (r *ScenarioRun) OpenStoreFor(ctx context.Context) (store *Store, closeStore func() error, err error) {
	store, err = OpenStore(ctx, r.Env, r.Common)
	if err != nil {
		return nil, nil, err
	}
	return store, store.Close, nil
}

// stopAtEnd stops client softly at the end of the run (before the stores
// it uses are dropped, if they were opened first).
func (r *ScenarioRun) stopAtEnd(client *spool.Client) {
	r.AtEnd(func() { stopClient(r.Env.Stderr, r.Name, client) })
}

// Progress draws a task's progress on stderr, unless --quiet.
func (r *ScenarioRun) Progress(label, unit string, total int64, current func() int64) *cli.Progress {
	return cli.StartProgress(r.Common.ProgressWriter(r.Stderr), r.Env.StderrTerminal, label, unit, total, current)
}

// Logger is the clients' logger: warnings and errors, on the shared stderr.
func (r *ScenarioRun) Logger() *slog.Logger { return Logger(r.Stderr) }

// Finish prints res as JSON (--json) or as table prints it, then draws the
// figure into --plot, if given: a chart that cannot be written is reported
// after the results, never instead of them.
func (r *ScenarioRun) Finish(res any, table func(io.Writer) error, figure func() *plot.Figure) error {
	return writeResult(r.Env, r.Name, *r.Common.AsJSON, res, table, *r.plot, figure)
}

// DefaultPrefetch is the queue's --prefetch in the scenarios other than
// the drain (drainPrefetch).
const DefaultPrefetch = 1000

// QueueFlags are the flags of scenarios that run one client over a queue of
// no-op jobs: its concurrency and outcome writing, and how the jobs are
// inserted.
type QueueFlags struct {
	Workers, Prefetch, Batch, Chunk *int
	Delay                           *time.Duration
	DeleteCompleted                 *bool
}

// AddQueueFlags registers the queue flags on r, --prefetch defaulting to
// prefetch.
func (r *ScenarioRun) AddQueueFlags(prefetch int) *QueueFlags {
	fs := r.Flags
	return &QueueFlags{
		Workers:         fs.Int("workers", 100, "MaxWorkers of the queue"),
		Prefetch:        fs.Int("prefetch", prefetch, "Prefetch of the queue (0: none)"),
		Batch:           fs.Int("batch", 2000, "CompletionBatchMax"),
		Delay:           fs.Duration("completion-delay", 0, "CompletionDelay"),
		DeleteCompleted: fs.Bool("delete-completed", false, "delete jobs as they complete"),
		Chunk:           fs.Int("insert-chunk", 10000, "jobs per insert call"),
	}
}

// Checks are the queue flags' conditions, for check.
func (q *QueueFlags) Checks() []Check {
	return []Check{
		Want(*q.Workers >= 1 && *q.Workers <= 10000, "--workers must be between 1 and 10000"),
		Want(*q.Prefetch >= 0 && *q.Prefetch <= 100000, "--prefetch must be between 0 and 100000"),
		Want(*q.Batch >= 1, "--batch must be at least 1"),
		Want(*q.Delay >= 0, "--completion-delay must not be negative"),
		Want(*q.Chunk >= 1, "--insert-chunk must be at least 1"),
	}
}

// Config returns the client config the flags ask for, on the default queue.
func (q *QueueFlags) Config() spool.Config {
	return spool.Config{
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *q.Workers, Prefetch: queuePrefetch(*q.Prefetch)}},
		CompletionBatchMax: *q.Batch,
		CompletionDelay:    *q.Delay,
		CompletedRetention: retentionFor(*q.DeleteCompleted),
	}
}

// Service stands for what a job calls: each request holds one of its
// connections for Latency, so at most as many requests as it has
// connections are in flight (a pool to a database or an API, a rate of
// requests per connection). A request may carry many jobs.
type Service struct {
	Latency time.Duration
	conns   chan struct{}
}

// NewService returns a service of conns connections (at least 1) whose
// requests take latency; a zero latency makes requests free (nil).
func NewService(latency time.Duration, conns int) *Service {
	if latency <= 0 {
		return nil
	}
	return &Service{Latency: latency, conns: make(chan struct{}, max(conns, 1))}
}

// Request makes one request: it waits for a free connection, then holds
// it for Latency. A nil service returns at once.
func (s *Service) Request() {
	if s == nil {
		return
	}
	s.conns <- struct{}{}
	time.Sleep(s.Latency)
	<-s.conns
}

// NoopManyClient is NoopClient with a many-worker (spool.AddManyWorker)
// taking up to maxJobs jobs per call, waiting up to maxWait for them; each
// call makes one request to svc (nil: none).
func (q *QueueFlags) NoopManyClient(be backend.Backend, r *ScenarioRun, maxJobs int, maxWait time.Duration, svc *Service) (*spool.Client, *atomic.Int64, error) {
	handled := &atomic.Int64{}
	ws := spool.NewWorkers()
	if err := spool.AddManyWorkerSafely(ws, spool.WorkManyFunc(func(_ context.Context, jobs []*spool.Job[Noop]) error {
		svc.Request()
		handled.Add(int64(len(jobs)))
		return nil
	}), spool.ManyConfig[Noop]{MaxJobs: maxJobs, MaxWait: maxWait}); err != nil {
		return nil, nil, err
	}
	return q.clientWith(be, r, ws, handled)
}

// RequestClient is NoopClient whose worker makes one request to svc per
// job.
func (q *QueueFlags) RequestClient(be backend.Backend, r *ScenarioRun, svc *Service) (*spool.Client, *atomic.Int64, error) {
	handled := &atomic.Int64{}
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[Noop]) error {
		svc.Request()
		handled.Add(1)
		return nil
	})); err != nil {
		return nil, nil, err
	}
	return q.clientWith(be, r, ws, handled)
}

func (q *QueueFlags) clientWith(be backend.Backend, r *ScenarioRun, ws *spool.Workers, handled *atomic.Int64) (*spool.Client, *atomic.Int64, error) {
	cfg := q.Config()
	cfg.Workers, cfg.Logger = ws, r.Logger()
	client, err := spool.NewClient(be, &cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	return client, handled, nil
}

// NoopClient returns a client over be with the queue flags' config and a
// no-op worker for the bench's jobs, and the count of jobs it handled. With
// queues named, it works those, each configured as the flags say, instead
// of the default queue.
func (q *QueueFlags) NoopClient(be backend.Backend, r *ScenarioRun, queues ...string) (*spool.Client, *atomic.Int64, error) {
	handled := &atomic.Int64{}
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[Noop]) error {
		handled.Add(1)
		return nil
	})); err != nil {
		return nil, nil, err
	}
	cfg := q.Config()
	cfg.Workers, cfg.Logger = ws, r.Logger()
	if len(queues) > 0 {
		qc := cfg.Queues[spool.DefaultQueue]
		cfg.Queues = map[string]spool.QueueConfig{}
		for _, name := range queues {
			cfg.Queues[name] = qc
		}
	}
	client, err := spool.NewClient(be, &cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	return client, handled, nil
}
