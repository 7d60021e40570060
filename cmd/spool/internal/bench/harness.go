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
	"github.com/spoolq/spool/cmd/spool/internal/cli"
	"github.com/spoolq/spool/cmd/spool/internal/plot"
)

// scenarioRun is one invocation of a scenario, from its flags to its output.
// A scenario's Run makes one, adds its own flags to fs, calls parse, then
// check with its own conditions, then begin; it opens scratch stores with openStore, draws
// progress with progress, logs through logger, and ends with finish. It
// holds what every scenario used to repeat: the common flags, their checks,
// the --timeout bound, the CPU profile, the store's life, the shared stderr
// and the JSON, table and chart output.
type scenarioRun struct {
	name   string // "bench drain", in errors and usage errors
	env    *cli.Env
	fs     *flag.FlagSet
	common *benchCommon
	plot   *string // --plot FILE
	// strategy is --strategy, for scenarios that offer it (withStrategy).
	strategy *string
	// stderr is shared by progress and client logs, which write from
	// several goroutines.
	stderr *lockedWriter
	// ends run at the end of the run, last registered first.
	ends []func()
}

// newScenarioRun starts a run of the scenario called name ("drain") with
// the common flags and --plot.
func newScenarioRun(env *cli.Env, name string) *scenarioRun {
	r := &scenarioRun{name: "bench " + name, env: env, stderr: &lockedWriter{w: env.Stderr}}
	r.fs = flag.NewFlagSet(r.name, flag.ContinueOnError)
	r.common = addBenchCommon(r.fs)
	r.plot = addPlotFlag(r.fs)
	return r
}

// withStrategy adds --strategy (the claim strategy, as the spool_claim URL
// parameter sets it).
func (r *scenarioRun) withStrategy() *scenarioRun {
	r.strategy = r.fs.String("strategy", "", "claim strategy: pessimistic or optimistic (default: the backend's)")
	return r
}

// check is one condition a scenario's flags must meet.
type check struct {
	ok  bool
	msg string
}

// want is a check: ok, or the usage error msg.
func want(ok bool, format string, args ...any) check {
	return check{ok: ok, msg: fmt.Sprintf(format, args...)}
}

// parse parses args and refuses positional arguments. Then call check.
func (r *scenarioRun) parse(args []string, usage string) error {
	pos, err := cli.ParseFlags(r.fs, args, usage)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef(r.name, "unexpected argument %q", pos[0])
	}
	return nil
}

// check checks, once the flags are parsed, the scenario's own conditions in
// order and then the common flags (--timeout, --strategy, --plot). The
// first that fails is the usage error; nothing has been touched then.
func (r *scenarioRun) check(checks ...check) error {
	for _, c := range checks {
		if !c.ok {
			return cli.Usagef(r.name, "%s", c.msg)
		}
	}
	if *r.common.timeout < 0 {
		return cli.Usagef(r.name, "--timeout must not be negative")
	}
	if r.strategy != nil {
		if err := applyStrategyFlag(r.common, *r.strategy); err != nil {
			return cli.Usagef(r.name, "%v", err)
		}
	}
	return checkPlotPath(r.name, *r.plot)
}

// begin bounds ctx by --timeout. Call end when the run is over (deferred).
func (r *scenarioRun) begin(ctx context.Context) context.Context {
	ctx, cancel := r.common.withTimeout(ctx, r.name)
	r.atEnd(cancel)
	return ctx
}

// atEnd registers f to run at the end of the run.
func (r *scenarioRun) atEnd(f func()) { r.ends = append(r.ends, f) }

// end runs what the run registered, last first: stopping clients before
// their stores are dropped, and the store before the timeout is released.
func (r *scenarioRun) end() {
	for i := len(r.ends) - 1; i >= 0; i-- {
		r.ends[i]()
	}
	r.ends = nil
}

// startProfile starts the --cpuprofile profile, if asked for, until the
// end of the run: call it where the measured phase begins.
func (r *scenarioRun) startProfile() error {
	stop, err := r.common.startCPUProfile()
	if err != nil {
		return err
	}
	r.atEnd(stop)
	return nil
}

// openStore opens a migrated scratch store that lives until the end of the
// run, when it is dropped (unless --keep); a failure to drop it is reported
// on stderr.
func (r *scenarioRun) openStore(ctx context.Context) (*benchStore, error) {
	store, err := openBenchStore(ctx, r.env, r.common)
	if err != nil {
		return nil, err
	}
	r.atEnd(func() {
		if cerr := store.Close(); cerr != nil {
			fmt.Fprintf(r.env.Stderr, "spool: %v\n", cerr)
		}
	})
	return store, nil
}

// openStoreFor opens a scratch store for one part of a run (a cell of
// bench insert, a backlog of bench scale); close drops it and returns the
// error, if any.
func (r *scenarioRun) openStoreFor(ctx context.Context) (store *benchStore, closeStore func() error, err error) {
	store, err = openBenchStore(ctx, r.env, r.common)
	if err != nil {
		return nil, nil, err
	}
	return store, store.Close, nil
}

// stopAtEnd stops client softly at the end of the run (before the stores
// it uses are dropped, if they were opened first).
func (r *scenarioRun) stopAtEnd(client *spool.Client) {
	r.atEnd(func() { stopClient(r.env.Stderr, r.name, client) })
}

// progress draws a task's progress on stderr, unless --quiet.
func (r *scenarioRun) progress(label, unit string, total int64, current func() int64) *cli.Progress {
	return cli.StartProgress(r.common.progressWriter(r.stderr), r.env.StderrTerminal, label, unit, total, current)
}

// logger is the clients' logger: warnings and errors, on the shared stderr.
func (r *scenarioRun) logger() *slog.Logger { return benchLogger(r.stderr) }

// finish prints res as JSON (--json) or as table prints it, then draws the
// figure into --plot, if given: a chart that cannot be written is reported
// after the results, never instead of them.
func (r *scenarioRun) finish(res any, table func(io.Writer) error, figure func() *plot.Figure) error {
	return writeResult(r.env, r.name, *r.common.asJSON, res, table, *r.plot, figure)
}

// defaultPrefetch is the queue's --prefetch in the scenarios other than
// the drain (drainPrefetch).
const defaultPrefetch = 1000

// queueFlags are the flags of scenarios that run one client over a queue of
// no-op jobs: its concurrency and outcome writing, and how the jobs are
// inserted.
type queueFlags struct {
	workers, prefetch, batch, chunk *int
	delay                           *time.Duration
	deleteCompleted                 *bool
}

// addQueueFlags registers the queue flags on r, --prefetch defaulting to
// prefetch.
func (r *scenarioRun) addQueueFlags(prefetch int) *queueFlags {
	fs := r.fs
	return &queueFlags{
		workers:         fs.Int("workers", 100, "MaxWorkers of the queue"),
		prefetch:        fs.Int("prefetch", prefetch, "Prefetch of the queue (0: none)"),
		batch:           fs.Int("batch", 2000, "CompletionBatchMax"),
		delay:           fs.Duration("completion-delay", 0, "CompletionDelay"),
		deleteCompleted: fs.Bool("delete-completed", false, "delete jobs as they complete"),
		chunk:           fs.Int("insert-chunk", 10000, "jobs per insert call"),
	}
}

// checks are the queue flags' conditions, for check.
func (q *queueFlags) checks() []check {
	return []check{
		want(*q.workers >= 1 && *q.workers <= 10000, "--workers must be between 1 and 10000"),
		want(*q.prefetch >= 0 && *q.prefetch <= 100000, "--prefetch must be between 0 and 100000"),
		want(*q.batch >= 1, "--batch must be at least 1"),
		want(*q.delay >= 0, "--completion-delay must not be negative"),
		want(*q.chunk >= 1, "--insert-chunk must be at least 1"),
	}
}

// config returns the client config the flags ask for, on the default queue.
func (q *queueFlags) config() spool.Config {
	return spool.Config{
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *q.workers, Prefetch: queuePrefetch(*q.prefetch)}},
		CompletionBatchMax: *q.batch,
		CompletionDelay:    *q.delay,
		CompletedRetention: retentionFor(*q.deleteCompleted),
	}
}

// noopClient returns a client over be with the queue flags' config and a
// no-op worker for the bench's jobs, and the count of jobs it handled. With
// queues named, it works those, each configured as the flags say, instead
// of the default queue.
func (q *queueFlags) noopClient(be backend.Backend, r *scenarioRun, queues ...string) (*spool.Client, *atomic.Int64, error) {
	handled := &atomic.Int64{}
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[benchNoop]) error {
		handled.Add(1)
		return nil
	})); err != nil {
		return nil, nil, err
	}
	cfg := q.config()
	cfg.Workers, cfg.Logger = ws, r.logger()
	if len(queues) > 0 {
		qc := cfg.Queues[spool.DefaultQueue]
		cfg.Queues = map[string]spool.QueueConfig{}
		for _, name := range queues {
			cfg.Queues[name] = qc
		}
	}
	client, err := spool.NewClient(be, &cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.name, err)
	}
	return client, handled, nil
}
