package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"
)

// New returns the bench command, writing to env.
func New(env *cli.Env) cli.Command { return &BenchCommand{m: env} }

// BenchCommand dispatches the benchmark scenarios. Each scenario runs on a
// scratch store of its own (a fresh schema for PostgreSQL), dropped at the
// end unless --keep is given.
type BenchCommand struct{ m *cli.Env }

// benchScenario is one registered bench scenario.
type benchScenario struct {
	// summary is the one-line description shown by 'spool bench -h'.
	summary string
	// newCommand returns the scenario's command.
	newCommand func(m *cli.Env) cli.Command
}

// benchScenarios maps scenario names to scenarios; each bench_<name>.go file
// registers its own in an init function.
var benchScenarios = map[string]benchScenario{}

// registerScenario adds a scenario; a duplicate name is a programming
// error.
func registerScenario(name, summary string, newCommand func(m *cli.Env) cli.Command) {
	if _, dup := benchScenarios[name]; dup {
		panic("spool: bench scenario registered twice: " + name)
	}
	benchScenarios[name] = benchScenario{summary: summary, newCommand: newCommand}
}

// scenarioNames returns the registered scenario names, sorted.
func scenarioNames() []string {
	names := make([]string, 0, len(benchScenarios))
	for name := range benchScenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Run implements cli.Command.
func (c *BenchCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("bench", "missing scenario (%s)", strings.Join(scenarioNames(), ", "))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return &cli.HelpRequest{Usage: c.Usage()}
	}
	sc, ok := benchScenarios[args[0]]
	if !ok {
		return cli.Usagef("bench", "unknown scenario %q (want one of %s)", args[0], strings.Join(scenarioNames(), ", "))
	}
	return sc.newCommand(c.m).Run(ctx, args[1:])
}

// Usage implements cli.Command.
func (c *BenchCommand) Usage() string {
	var b strings.Builder
	b.WriteString(`Usage: spool bench <scenario> [flags]

Measures Spool on a scratch store: for PostgreSQL a fresh schema named
spool_bench_<random> in the database given, migrated at the start and
dropped at the end (unless --keep).

Scenarios:

`)
	for _, name := range scenarioNames() {
		fmt.Fprintf(&b, "\t%-11s %s\n", name, benchScenarios[name].summary)
	}
	b.WriteString("\nRun 'spool bench <scenario> -h' for a scenario's flags.\n")
	b.WriteString(`
Experiments that start database servers, clusters or network namespaces of
their own (chaos, hosts, failover, shards), the SQLite busy-handler study
(contention) and the raw-SQL ceiling are Spool's lab, apart from this
binary: from a checkout of the repository, 'go run ./bench/lab -h'.

Server CPU a job, where a scenario reports it, is read on Linux from every
PostgreSQL and MariaDB process of this machine: on a machine whose other
servers or sessions are busy it counts their work too. Set
SPOOL_BENCH_SERVER_PIDS to process IDs (comma-separated) to read those
alone: a MariaDB server is one process, while each PostgreSQL connection
is a process of its own, so it serves MariaDB best.
`)
	return b.String()
}

// Common holds the flags every bench scenario takes.
type Common struct {
	DBURL      *string
	AsJSON     *bool
	Keep       *bool
	Quiet      *bool
	Timeout    *time.Duration
	CPUProfile *string
}

// withTimeout bounds ctx by --timeout, if given, with a cause naming the
// command; the returned function releases it.
func (c *Common) withTimeout(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	if *c.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, *c.Timeout, fmt.Errorf("%s: --timeout %s reached", name, *c.Timeout))
}

// startCPUProfile starts the --cpuprofile profile, if asked for; the
// returned function stops it.
func (c *Common) startCPUProfile() (stop func(), err error) {
	if *c.CPUProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(*c.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// AddCommon registers the common bench flags on fs.
func AddCommon(fs *flag.FlagSet) *Common {
	return &Common{
		DBURL:      cli.AddDatabaseFlag(fs),
		AsJSON:     fs.Bool("json", false, "print only a JSON object on stdout"),
		Keep:       fs.Bool("keep", false, "keep the scratch schema"),
		Quiet:      fs.Bool("quiet", false, "no progress on stderr"),
		Timeout:    fs.Duration("timeout", 0, "give up after this long (0: no limit)"),
		CPUProfile: fs.String("cpuprofile", "", "write a Go CPU profile of the measured phase to FILE"),
	}
}

// CommonUsage documents the flags of Common, for scenario usages.
const CommonUsage = `	--json
		print only a JSON object with the results and settings on stdout
	--keep
		keep the scratch schema instead of dropping it
	--quiet
		draw no progress on stderr
	--timeout DURATION
		give up after this long (default 0: no limit)
	--cpuprofile FILE
		write a Go CPU profile of the measured phase to FILE (go tool pprof)
	--database-url URL
		database to create the scratch schema in (default $SPOOL_DATABASE_URL)
`

// Store is an open, migrated scratch store.
type Store struct {
	Scratch *stores.Scratch
	Backend backend.Backend
	Keep    bool
	stderr  io.Writer
	// session is the application_name of every PostgreSQL session opened
	// from scratch.URL, by which sessionPIDs finds their server processes;
	// "" for other stores.
	session string
}

// OpenStore creates a scratch store next to the database the flags
// name, opens and migrates it. Close it to drop it.
func OpenStore(ctx context.Context, m *cli.Env, common *Common) (*Store, error) {
	dsn, err := cli.DatabaseURL(*common.DBURL)
	if err != nil {
		return nil, err
	}
	support := stores.For(dsn)
	if support.NewScratch == nil {
		return nil, fmt.Errorf("bench: scratch stores are not supported for %q URLs yet", stores.Scheme(dsn))
	}
	scratch, err := support.NewScratch(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	s := &Store{Scratch: scratch, Keep: *common.Keep, stderr: m.Stderr}
	if scheme := stores.Scheme(dsn); scheme == "postgres" || scheme == "postgresql" {
		// Named apart from every other session, so that the CPU time of
		// this run's own server processes can be read beside other load.
		s.session = "spool-bench-" + scratch.Name
		if scratch.URL, err = SetURLParam(scratch.URL, "application_name", s.session); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	be, err := backend.Open(ctx, scratch.URL)
	if err != nil {
		// Some scratch stores exist before the backend opens (a MySQL
		// database is created first): drop it, whatever state it is in.
		dropCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if derr := scratch.Drop(dropCtx); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("bench: %w", err)
	}
	s.Backend = be
	if err := be.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	return s, nil
}

// sessionPIDs lists the server processes of the store's own PostgreSQL
// sessions (those opened from scratch.URL), or nil for other stores and
// when they cannot be listed.
func (s *Store) sessionPIDs(ctx context.Context) []int {
	pg, ok := s.Backend.(*postgres.Backend)
	if !ok || s.session == "" {
		return nil
	}
	rows, err := pg.Pool().Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, s.session)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}

// Close closes the backend and drops the scratch store unless it is kept.
// It does not depend on the run's context, so that an interrupted run still
// cleans up.
func (s *Store) Close() error {
	err := s.Backend.Close()
	if s.Keep {
		fmt.Fprintf(s.stderr, "bench: kept scratch store %s (%s)\n", s.Scratch.Name, redactURL(s.Scratch.URL))
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if derr := s.Scratch.Drop(ctx); derr != nil {
		return errors.Join(err, fmt.Errorf("bench: %w", derr))
	}
	return err
}

// redactURL hides the password of a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// ProgressWriter returns where a scenario draws progress.
func (c *Common) ProgressWriter(w io.Writer) io.Writer {
	if *c.Quiet {
		return io.Discard
	}
	return w
}

// LockedWriter serialises writes from the progress goroutine and the
// client's logger.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write implements io.Writer.
func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}

// Logger logs warnings and errors only, so progress and results stay
// readable.
func Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Noop is the args of the benchmark's no-op jobs.
type Noop struct{}

// Kind implements spool.JobArgs.
func (Noop) Kind() string { return "spool_bench_noop" }

// InsertJobs inserts n no-op jobs into queue, chunk at a time, with
// InsertMany (or InsertManyFast when fast), and returns how long it took.
// inserted counts the jobs written.
func InsertJobs(ctx context.Context, client *spool.Client, queue string, n, chunk int, fast bool, inserted *atomic.Int64) (time.Duration, error) {
	params := make([]spool.InsertManyParams, min(n, chunk))
	opts := &spool.InsertOpts{Queue: queue}
	for i := range params {
		params[i] = spool.InsertManyParams{Args: Noop{}, InsertOpts: opts}
	}
	start := time.Now()
	for done := 0; done < n; {
		k := min(chunk, n-done)
		var err error
		if fast {
			_, err = client.InsertManyFast(ctx, params[:k])
		} else {
			_, err = client.InsertMany(ctx, params[:k])
		}
		if err != nil {
			return 0, fmt.Errorf("bench: insert jobs: %w", err)
		}
		done += k
		inserted.Store(int64(done))
	}
	return time.Since(start), nil
}

// CompletionCounter wraps a backend and counts the completions it wrote:
// every OutcomeComplete that JobFinishMany applied, whoever sent it. Done is
// closed, and DoneAt set, when the count reaches the target, so a benchmark
// measures written completions, not handler returns.
type CompletionCounter struct {
	backend.Backend
	Capabilities
	target  int64
	written atomic.Int64
	once    sync.Once
	done    chan struct{}
	DoneAt  time.Time // set before done is closed
}

// CountCompletions wraps be. The result implements backend.Notifier when be
// does, so the client keeps its push wake-ups.
func CountCompletions(be backend.Backend, target int64) (backend.Backend, *CompletionCounter) {
	c := &CompletionCounter{Backend: be, Capabilities: Capabilities{be}, target: target, done: make(chan struct{})}
	if n, ok := be.(backend.Notifier); ok {
		nc := &notifyingCounter{CompletionCounter: c, notifier: n}
		if r, ok := be.(backend.WakeRouter); ok {
			return &routingCounter{notifyingCounter: nc, WakeRouter: r}, c
		}
		return nc, c
	}
	return c, c
}

// routingCounter is a notifyingCounter over a backend that routes its
// wake-ups.
type routingCounter struct {
	*notifyingCounter
	backend.WakeRouter
}

// JobFinishMany implements backend.Backend, counting applied completions.
func (c *CompletionCounter) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	res, err := c.Backend.JobFinishMany(ctx, p)
	if err != nil {
		return res, err
	}
	n := int64(res.CountApplied(p, isCompletion))
	if n > 0 && c.written.Add(n) >= c.target {
		c.once.Do(func() {
			c.DoneAt = time.Now()
			close(c.done)
		})
	}
	return res, nil
}

// Written returns the number of completions written so far.
func (c *CompletionCounter) Written() int64 { return c.written.Load() }

// notifyingCounter is a CompletionCounter over a backend with push wake-ups.
type notifyingCounter struct {
	*CompletionCounter
	notifier backend.Notifier
}

// Listen implements backend.Notifier.
func (n *notifyingCounter) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return n.notifier.Listen(ctx, ready, onWake)
}

// AddWakeDemand implements backend.WakeDemand where the wrapped notifier
// does (PostgreSQL's relay of inserts from SQL polls by it).
func (n *notifyingCounter) AddWakeDemand(waiting func() bool) (remove func()) {
	return backend.AddWakeDemandTo(n.notifier, waiting)
}

// AddWakeQueues implements backend.WakeQueues where the wrapped notifier
// does (MySQL's looker reads new jobs per set of queues).
func (n *notifyingCounter) AddWakeQueues(queues []string) (remove func()) {
	return backend.AddWakeQueuesTo(n.notifier, queues)
}

// PendingCount sums the jobs of a queue that are not finished.
func PendingCount(s backend.QueueStats) int64 {
	return s.Counts[backend.StateAvailable] + s.Counts[backend.StateScheduled] +
		s.Counts[backend.StateRetryable] + s.Counts[backend.StateRunning]
}

// QueueStats returns the stats of one queue (zero counts if it has no jobs).
func QueueStats(ctx context.Context, client *spool.Client, queue string) (backend.QueueStats, error) {
	all, err := client.QueueStats(ctx)
	if err != nil {
		return backend.QueueStats{}, err
	}
	for _, s := range all {
		if s.Queue == queue {
			return s, nil
		}
	}
	return backend.QueueStats{Queue: queue, Counts: map[backend.State]int64{}}, nil
}

// FormatCounts formats a queue's counts in lifecycle order, for errors.
func FormatCounts(s backend.QueueStats) string {
	parts := make([]string, 0, len(backend.AllStates))
	for _, st := range backend.AllStates {
		parts = append(parts, fmt.Sprintf("%s=%d", st, s.Counts[st]))
	}
	return strings.Join(parts, " ")
}

// isCompletion matches a finish that completes its job.
func isCompletion(f backend.JobFinish) bool { return f.Outcome == backend.OutcomeComplete }
