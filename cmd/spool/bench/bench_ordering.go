package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"
)

func init() {
	registerScenario("ordering", "N jobs in order, W workers: reorder histogram and jobs run twice (as in \"Laravel queueing optimization\")",
		func(m *cli.Env) cli.Command { return &BenchOrderingCommand{m: m} })
}

// BenchOrderingCommand measures how far from insertion order jobs start, and
// whether any job runs more than once, as in the "Laravel queueing optimization" analysis:
// N jobs are inserted in order, numbered, then W workers, each a client of
// its own (as separate processes are), work them all.
type BenchOrderingCommand struct{ m *cli.Env }

// claimStrategyParam is the URL parameter both SQL backends read the claim
// strategy from.
const claimStrategyParam = "spool_claim"

// WithClaimStrategy adds spool_claim=strategy to a database URL; an empty
// strategy leaves the URL (and the backend's default) alone.
func WithClaimStrategy(dsn, strategy string) (string, error) {
	if strategy == "" {
		return dsn, nil
	}
	switch strategy {
	case "pessimistic", "optimistic":
	default:
		return "", fmt.Errorf("--strategy %q: want pessimistic or optimistic", strategy)
	}
	switch stores.Scheme(dsn) {
	case "mysql", "postgres", "postgresql":
	default:
		return "", fmt.Errorf("--strategy applies to MySQL and PostgreSQL, not to %q URLs", stores.Scheme(dsn))
	}
	return SetURLParam(dsn, claimStrategyParam, strategy)
}

// applyStrategyFlag points the --database-url flag value at the given claim
// strategy, resolving the default URL first.
func applyStrategyFlag(common *Common, strategy string) error {
	if strategy == "" {
		return nil
	}
	dsn, err := cli.DatabaseURL(*common.DBURL)
	if err != nil {
		return err
	}
	dsn, err = WithClaimStrategy(dsn, strategy)
	if err != nil {
		return err
	}
	*common.DBURL = dsn
	return nil
}

// claimStrategyOf reports the strategy a backend claims with, if it says.
func claimStrategyOf(be backend.Backend) string {
	if s, ok := be.(interface{ ClaimStrategy() string }); ok {
		return s.ClaimStrategy()
	}
	return ""
}

// orderingResult is the outcome of bench ordering, as printed with --json.
type orderingResult struct {
	Scenario  string       `json:"scenario"`
	Backend   string       `json:"backend"`
	Strategy  string       `json:"strategy,omitempty"`
	Store     string       `json:"store"`
	Kept      bool         `json:"kept"`
	Jobs      int          `json:"jobs"`
	Workers   int          `json:"workers"`
	Clients   int          `json:"clients"`
	PerClient int          `json:"workers_per_client"`
	Prefetch  int          `json:"prefetch"`
	Seconds   float64      `json:"seconds"`
	JobsPerS  float64      `json:"jobs_per_s"`
	Runs      int64        `json:"runs"`
	RanTwice  int          `json:"jobs_run_more_than_once"`
	Reorder   reorderStats `json:"reorder"`
	Histogram []reorderBin `json:"histogram"`
	// Lock conflicts the backend retried (MySQL), summed over the clients.
	Deadlocks           uint64 `json:"deadlocks_retried"`
	LockWaitTimeouts    uint64 `json:"lock_wait_timeouts_retried"`
	OptimisticConflicts uint64 `json:"optimistic_conflicts"`
	GOMAXPROCS          int    `json:"gomaxprocs"`
}

// reorderStats summarises |start position − insert index| over all runs.
type reorderStats struct {
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p99_9"`
}

// seqArgs numbers a job by its place in the insert order.
type seqArgs struct {
	Seq int `json:"seq"`
}

// Kind implements spool.JobArgs.
func (seqArgs) Kind() string { return "spool_bench_seq" }

// Run implements cli.Command.
func (c *BenchOrderingCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench ordering").withStrategy()
	fs := r.Flags
	jobs := fs.Int("jobs", 10000, "number of jobs")
	workers := fs.Int("workers", 10, "workers in all")
	perClient := fs.Int("per-client", 1, "workers per client (each client has its own pool)")
	prefetch := fs.Int("prefetch", 0, "Prefetch of each client's queue (0: none)")
	deleteCompleted := fs.Bool("delete-completed", true, "delete jobs as they complete, as the analysis's queues do")
	work := fs.Duration("work", 0, "how long each job's handler sleeps")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*jobs >= 1 && *jobs <= 10_000_000, "--jobs must be between 1 and 10000000"),
		Want(*workers >= 1 && *workers <= 10000, "--workers must be between 1 and 10000"),
		Want(*perClient >= 1 && *workers%*perClient == 0, "--per-client must be at least 1 and divide --workers"),
		Want(*perClient < 1 || *workers / *perClient <= 200, "at most 200 clients (--workers / --per-client)"),
		Want(*prefetch >= 0 && *prefetch <= 100000, "--prefetch must be between 0 and 100000"),
		Want(*work >= 0, "--work must not be negative"),
	); err != nil {
		return err
	}
	name, common, plotPath := r.Name, r.Common, r.plot
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	stderr := r.Stderr
	progressTo := common.ProgressWriter(stderr)

	inserter, err := spool.NewClient(store.Backend, &spool.Config{Logger: Logger(stderr)})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var inserted atomic.Int64
	bar := cli.StartProgress(progressTo, c.m.StderrTerminal, "insert", "jobs", int64(*jobs), inserted.Load)
	err = insertSeqJobs(ctx, inserter, *jobs, &inserted)
	bar.Stop()
	if err != nil {
		return WithCause(ctx, err)
	}

	run := &orderingRun{runs: make([]int32, *jobs), order: make([]int32, 0, *jobs), done: make(chan struct{}), target: int64(*jobs)}
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[seqArgs]) error {
		run.started(j.Args.Seq)
		if *work > 0 {
			select {
			case <-time.After(*work):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})); err != nil {
		return err
	}
	queuePrefetch := *prefetch
	if queuePrefetch == 0 {
		queuePrefetch = -1 // spool: negative disables prefetch
	}
	retention := time.Duration(0)
	if *deleteCompleted {
		retention = -1
	}
	nClients := *workers / *perClient
	clients := make([]*spool.Client, nClients)
	backends := make([]backend.Backend, nClients)
	defer func() {
		for _, be := range backends {
			if be != nil {
				_ = be.Close()
			}
		}
	}()
	for i := range clients {
		be, err := backend.Open(ctx, store.Scratch.URL)
		if err != nil {
			return fmt.Errorf("%s: open client %d: %w", name, i, err)
		}
		backends[i] = be
		clients[i], err = spool.NewClient(KeepNotifier(&orderingCounter{Backend: be, Capabilities: Capabilities{be}, run: run}, be), &spool.Config{
			Workers:            ws,
			Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *perClient, Prefetch: queuePrefetch}},
			CompletedRetention: retention,
			Logger:             Logger(stderr),
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}

	stopProfile, err := common.startCPUProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	start := time.Now()
	for i, cl := range clients {
		if err := cl.Start(ctx); err != nil {
			return fmt.Errorf("%s: start client %d: %w", name, i, err)
		}
	}
	stopAll := func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Go(func() {
				if err := cl.Stop(stopCtx); err != nil {
					fmt.Fprintf(c.m.Stderr, "spool: %s: stop client: %v\n", name, err)
				}
			})
		}
		wg.Wait()
	}
	bar = cli.StartProgress(progressTo, c.m.StderrTerminal, "work", "jobs", int64(*jobs), run.written.Load)
	select {
	case <-run.done:
	case <-ctx.Done():
		bar.Stop()
		stopAll()
		return WithCause(ctx, fmt.Errorf("%s: interrupted at %d of %d completions: %w", name, run.written.Load(), *jobs, ctx.Err()))
	}
	bar.Stop()
	elapsed := run.doneAt.Sub(start)
	stopAll()

	res := orderingResult{
		Scenario:   "ordering",
		Backend:    store.Backend.Name(),
		Strategy:   claimStrategyOf(backends[0]),
		Store:      store.Scratch.Name,
		Kept:       store.Keep,
		Jobs:       *jobs,
		Workers:    *workers,
		Clients:    nClients,
		PerClient:  *perClient,
		Prefetch:   *prefetch,
		Seconds:    elapsed.Seconds(),
		JobsPerS:   cli.Rate(int64(*jobs), elapsed),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	for _, be := range backends {
		if my, ok := be.(*mysql.Backend); ok {
			m := my.Metrics()
			res.Deadlocks += m.Deadlocks
			res.LockWaitTimeouts += m.LockWaitTimeouts
			res.OptimisticConflicts += m.OptimisticConflicts
		}
	}
	distances, err := run.analyse(&res)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	res.Histogram = log2Bins(distances)
	res.Reorder = summarizeReorder(distances)
	if *plotPath != "" {
		title := strings.TrimSpace(fmt.Sprintf("ordering: %s %s", res.Backend, res.Strategy)) + fmt.Sprintf(", %d workers, %d jobs", res.Workers, res.Jobs)
		if err := writeReorderPlot(*plotPath, title, res.Histogram); err != nil {
			return err
		}
	}
	if *common.AsJSON {
		return cli.WriteJSON(c.m.Stdout, res)
	}
	return printOrderingResult(c.m.Stdout, &res)
}

// insertSeqJobs inserts jobs numbered 0..n-1, in order, in chunks.
func insertSeqJobs(ctx context.Context, client *spool.Client, n int, inserted *atomic.Int64) error {
	const chunk = 10000
	params := make([]spool.InsertManyParams, 0, min(n, chunk))
	for done := 0; done < n; {
		params = params[:0]
		for i := done; i < n && len(params) < chunk; i++ {
			params = append(params, spool.InsertManyParams{Args: seqArgs{Seq: i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("bench ordering: insert jobs: %w", err)
		}
		done += len(params)
		inserted.Store(int64(done))
	}
	return nil
}

// orderingRun records the order jobs start in and counts completions.
type orderingRun struct {
	mu    sync.Mutex
	order []int32 // job numbers in the order their handlers started
	runs  []int32 // runs per job number

	target  int64
	written atomic.Int64
	once    sync.Once
	done    chan struct{}
	doneAt  time.Time // set before done is closed
}

// started records that job seq's handler started.
func (r *orderingRun) started(seq int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq >= 0 && seq < len(r.runs) {
		r.runs[seq]++
	}
	r.order = append(r.order, int32(seq))
}

// completed counts n completions written.
func (r *orderingRun) completed(n int64) {
	if n > 0 && r.written.Add(n) >= r.target {
		r.once.Do(func() {
			r.doneAt = time.Now()
			close(r.done)
		})
	}
}

// analyse fills in the run counts and returns |position − job index| for
// every run. A job that never ran is an error: every completion was written.
func (r *orderingRun) analyse(res *orderingResult) ([]int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Runs = int64(len(r.order))
	for seq, n := range r.runs {
		switch {
		case n == 0:
			return nil, fmt.Errorf("job %d never ran, yet %d completions were written", seq, r.written.Load())
		case n > 1:
			res.RanTwice++
		}
	}
	distances := make([]int64, len(r.order))
	for pos, seq := range r.order {
		distances[pos] = int64(math.Abs(float64(pos - int(seq))))
	}
	return distances, nil
}

// summarizeReorder computes the reorder statistics of distances.
func summarizeReorder(distances []int64) reorderStats {
	if len(distances) == 0 {
		return reorderStats{}
	}
	sorted := slices.Clone(distances)
	slices.Sort(sorted)
	var sum float64
	for _, d := range sorted {
		sum += float64(d)
	}
	at := func(q float64) int64 {
		i := int(math.Ceil(q*float64(len(sorted)))) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	return reorderStats{
		Max:  sorted[len(sorted)-1],
		Mean: sum / float64(len(sorted)),
		P50:  at(0.50),
		P90:  at(0.90),
		P99:  at(0.99),
		P999: at(0.999),
	}
}

// orderingCounter wraps one client's backend and counts the completions it
// wrote into the shared run.
type orderingCounter struct {
	backend.Backend
	Capabilities
	run *orderingRun
}

// JobFinishMany implements backend.Backend, counting applied completions.
func (o *orderingCounter) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	res, err := o.Backend.JobFinishMany(ctx, p)
	if err != nil {
		return res, err
	}
	n := int64(res.CountApplied(p, isCompletion))
	o.run.completed(n)
	return res, nil
}

// printOrderingResult prints the result as a small table and the histogram.
func printOrderingResult(w io.Writer, r *orderingResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	strategy := r.Backend
	if r.Strategy != "" {
		strategy += " (" + r.Strategy + ")"
	}
	rows := [][2]string{
		{"scenario", r.Scenario},
		{"backend", strategy},
		{"jobs", fmt.Sprint(r.Jobs)},
		{"workers", fmt.Sprintf("%d (%d clients × %d)", r.Workers, r.Clients, r.PerClient)},
		{"prefetch", fmt.Sprint(r.Prefetch)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"jobs/s", cli.HumanInt(r.JobsPerS)},
		{"runs", fmt.Sprint(r.Runs)},
		{"jobs run more than once", fmt.Sprint(r.RanTwice)},
		{"reorder max", fmt.Sprint(r.Reorder.Max)},
		{"reorder mean", fmt.Sprintf("%.2f", r.Reorder.Mean)},
		{"reorder p50/p90/p99/p99.9", fmt.Sprintf("%d / %d / %d / %d", r.Reorder.P50, r.Reorder.P90, r.Reorder.P99, r.Reorder.P999)},
	}
	if r.Backend == "mysql" {
		rows = append(rows,
			[2]string{"deadlocks retried", fmt.Sprint(r.Deadlocks)},
			[2]string{"lock wait timeouts retried", fmt.Sprint(r.LockWaitTimeouts)},
			[2]string{"optimistic conflicts", fmt.Sprint(r.OptimisticConflicts)})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	fmt.Fprintf(tw, "\n|position − index|\tjobs\n")
	for _, b := range r.Histogram {
		label := fmt.Sprint(b.Lo)
		if b.Hi > b.Lo {
			label = fmt.Sprintf("%d–%d", b.Lo, b.Hi)
		}
		fmt.Fprintf(tw, "%s\t%d\n", label, b.Count)
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchOrderingCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench ordering [flags]

Reproduces the ordering analysis of "Laravel queueing optimization" (an
analysis of Laravel's database queue): creates a scratch store, inserts N no-op jobs numbered in
insert order, then starts W workers, each client with its own connection pool
as separate processes would have, and records the order in which handlers
start. It prints jobs/s, the reorder histogram of |start position − job
index| with its maximum and percentiles, and the number of jobs that ran more
than once (which must be 0). Jobs are deleted as they complete unless
--delete-completed=false.

Flags:

	--jobs N
		number of jobs (default 10000)
	--workers N
		workers in all (default 10)
	--per-client N
		workers per client; clients = workers / per-client (default 1)
	--prefetch N
		Prefetch of each client's queue; 0 disables prefetch (default 0)
	--strategy pessimistic|optimistic
		claim strategy (spool_claim URL parameter; default: the backend's)
	--delete-completed
		delete jobs as they complete (default true)
	--work DURATION
		how long each handler sleeps (default 0s)
`+PlotUsage+CommonUsage, "\n")
}
