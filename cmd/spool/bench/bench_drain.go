package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

// StallTimeout is how long drain waits without any progress before it looks
// whether jobs are left at all.
const StallTimeout = 5 * time.Second

func init() {
	registerScenario("drain", "insert N no-op jobs, then time one client working them all",
		func(m *cli.Env) cli.Command { return &BenchDrainCommand{m: m} })
}

// NewDrainCommand returns bench drain writing to m, for experiments that
// compare their figures with Spool's own drain.
func NewDrainCommand(m *cli.Env) cli.Command { return &BenchDrainCommand{m: m} }

// BenchDrainCommand inserts N no-op jobs, then times one client working them
// until every completion is written.
type BenchDrainCommand struct{ m *cli.Env }

// drainResult is the outcome of bench drain, as printed with --json.
type drainResult struct {
	Scenario          string  `json:"scenario"`
	Backend           string  `json:"backend"`
	Strategy          string  `json:"strategy,omitempty"`
	Store             string  `json:"store"`
	Kept              bool    `json:"kept"`
	Jobs              int     `json:"jobs"`
	Seconds           float64 `json:"seconds"`
	JobsPerS          float64 `json:"jobs_per_s"`
	InsertSeconds     float64 `json:"insert_seconds"`
	InsertJobsPerS    float64 `json:"insert_jobs_per_s"`
	Workers           int     `json:"workers"`
	Prefetch          int     `json:"prefetch"`
	Batch             int     `json:"batch"`
	CompletionDelay   string  `json:"completion_delay"`
	CompletionDelayMS float64 `json:"completion_delay_ms"`
	DeleteCompleted   bool    `json:"delete_completed"`
	InsertChunk       int     `json:"insert_chunk"`
	InsertFast        bool    `json:"insert_fast"`
	// Waiting is how many workflow tasks waited beside the jobs, never
	// claimable during the drain (--waiting).
	Waiting int `json:"waiting,omitempty"`
	// Many is the many-worker's MaxJobs (0: a worker of one job per run),
	// ManyWait its MaxWait.
	Many     int    `json:"many"`
	ManyWait string `json:"many_wait,omitempty"`
	// Request is how long each request of a handler run takes, and
	// RequestConns the connections of the service it calls (--request).
	Request      string `json:"request,omitempty"`
	RequestConns int    `json:"request_conns,omitempty"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	// ClientCPUPerJobUS is this process's CPU time (user and system)
	// during the drain per job, in microseconds; ServerCPUPerJobUS that of
	// the database server processes on this machine (PostgreSQL's,
	// MariaDB's; absent for SQLite, which runs in the client, and for a
	// remote server), which on a shared machine includes other sessions'
	// unless ServerPIDsEnv names the run's server.
	ClientCPUPerJobUS float64 `json:"client_cpu_per_job_us,omitempty"`
	ServerCPUPerJobUS float64 `json:"server_cpu_per_job_us,omitempty"`
	// SessionCPUPerJobUS is the part of ServerCPUPerJobUS spent by the
	// server processes of the run's own sessions (PostgreSQL on this
	// machine only): unlike it, it leaves out other load on the server,
	// and also the server's own background work (WAL writer, autovacuum).
	SessionCPUPerJobUS float64 `json:"session_cpu_per_job_us,omitempty"`
	// Claims and Writes count the drain's claim calls and outcome writes
	// (MySQL only), and ClaimsInFlight and WritesInFlight are the mean
	// number of each in flight: their summed call time over the drain's.
	Claims         uint64  `json:"claims,omitempty"`
	Writes         uint64  `json:"writes,omitempty"`
	ClaimsInFlight float64 `json:"claims_in_flight,omitempty"`
	WritesInFlight float64 `json:"writes_in_flight,omitempty"`
}

// drainPrefetch is the drain's --prefetch: a claim is sent when half the
// prefetch is left, for about the other half, so the prefetch sets the
// claims' size, and larger claims cost the client and the server less per
// job. 3,000 was the fastest of 1,000 to 5,000 (BENCHMARKS.md, "Wide
// finishes through the span index; claims of 1,500 jobs; lz4 lease rows").
const drainPrefetch = 3000

// Run implements cli.Command.
func (c *BenchDrainCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench drain").withStrategy()
	jobs := r.Flags.Int("jobs", 0, "number of jobs (required)")
	q := r.AddQueueFlags(drainPrefetch)
	fast := r.Flags.Bool("insert-fast", false, "insert with InsertManyFast (no ids returned)")
	many := r.Flags.Int("many", 0, "work the jobs with a many-worker taking up to N jobs per call (0: one job per run)")
	manyWait := r.Flags.Duration("many-wait", 0, "the many-worker's MaxWait")
	request := r.Flags.Duration("request", 0, "each handler run makes one request to a service taking this long: per job, or per call with --many")
	conns := r.Flags.Int("request-conns", 4, "connections of the service --request calls")
	waiting := r.Flags.Int("waiting", 0, "workflow tasks left waiting in the queue during the drain")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(append([]Check{Want(*jobs >= 1, "--jobs N is required and must be at least 1"),
		Want(*many >= 0 && *many <= 10000, "--many N must be 0 to 10000"),
		Want(*manyWait >= 0, "--many-wait must not be negative"), Want(*request >= 0, "--request must not be negative"), Want(*conns >= 1, "--request-conns must be at least 1"),
		Want(*waiting >= 0, "--waiting must not be negative")}, q.Checks()...)...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}

	be, counter := CountCompletions(store.Backend, int64(*jobs))
	var (
		client  *spool.Client
		handled *atomic.Int64
	)
	svc := NewService(*request, *conns)
	switch {
	case *many > 0:
		client, handled, err = q.NoopManyClient(be, r, *many, *manyWait, svc)
	case svc != nil:
		client, handled, err = q.RequestClient(be, r, svc)
	default:
		client, handled, err = q.NoopClient(be, r)
	}
	if err != nil {
		return err
	}

	if *waiting > 0 {
		var inserted atomic.Int64
		bar := r.Progress("insert waiting", "tasks", int64(*waiting), inserted.Load)
		err := insertWorkflows(ctx, client, waitingWorkflows(*waiting), 4, &inserted, new([]int64))
		bar.Stop()
		if err != nil {
			return WithCause(ctx, err)
		}
	}
	var inserted atomic.Int64
	bar := r.Progress("insert", "jobs", int64(*jobs), inserted.Load)
	insertTime, err := InsertJobs(ctx, client, spool.DefaultQueue, *jobs, *q.Chunk, *fast, &inserted)
	bar.Stop()
	if err != nil {
		return WithCause(ctx, err)
	}

	if err := r.StartProfile(); err != nil {
		return err
	}
	cpu := startCPUSpan(func() []int { return store.sessionPIDs(ctx) })
	calls, hasCalls := mysqlCalls(store.Backend)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("bench drain: %w", err)
	}
	r.stopAtEnd(client)
	bar = r.Progress("drain", "jobs", int64(*jobs), counter.Written)
	sampler := startCounterSampler(counter.Written, 100*time.Millisecond)
	err = waitDrained(ctx, client, counter, handled)
	samples := sampler.Stop()
	bar.Stop()
	if err != nil {
		return WithCause(ctx, err)
	}
	elapsed := counter.DoneAt.Sub(start)
	clientCPU, serverCPU, sessionCPU := cpu.perJob(*jobs, store.Backend.Name())

	// Every completion is written; check the store agrees before reporting.
	stats, err := QueueStats(ctx, client, spool.DefaultQueue)
	if err != nil {
		return fmt.Errorf("bench drain: check results: %w", err)
	}
	wantCompleted := int64(*jobs)
	if *q.DeleteCompleted {
		wantCompleted = 0
	}
	if PendingCount(stats) != 0 || stats.Counts[backend.StateCompleted] != wantCompleted {
		return fmt.Errorf("bench drain: %d completions written but the queue holds %s", counter.Written(), FormatCounts(stats))
	}

	res := drainResult{
		Scenario:          "drain",
		Backend:           store.Backend.Name(),
		Strategy:          claimStrategyOf(store.Backend),
		Store:             store.Scratch.Name,
		Kept:              store.Keep,
		Jobs:              *jobs,
		Seconds:           elapsed.Seconds(),
		JobsPerS:          cli.Rate(int64(*jobs), elapsed),
		InsertSeconds:     insertTime.Seconds(),
		InsertJobsPerS:    cli.Rate(int64(*jobs), insertTime),
		Workers:           *q.Workers,
		Prefetch:          *q.Prefetch,
		Batch:             *q.Batch,
		CompletionDelay:   q.Delay.String(),
		CompletionDelayMS: float64(*q.Delay) / float64(time.Millisecond),
		DeleteCompleted:   *q.DeleteCompleted,
		InsertChunk:       *q.Chunk,
		InsertFast:        *fast,
		Waiting:           *waiting,
		Many:              *many,
		ManyWait:          manyWait.String(),
		Request:           request.String(),
		RequestConns:      *conns,
		GOMAXPROCS:        runtime.GOMAXPROCS(0),
	}
	res.ClientCPUPerJobUS, res.ServerCPUPerJobUS, res.SessionCPUPerJobUS = clientCPU, serverCPU, sessionCPU
	if hasCalls {
		res.Claims, res.Writes, res.ClaimsInFlight, res.WritesInFlight = calls.since(elapsed)
	}
	return r.Finish(res, func(w io.Writer) error { return printDrainResult(w, &res) },
		func() *plot.Figure { return drainFigure(&res, samples) })
}

// waitDrained is WaitDrainedQueue on the default queue.
func waitDrained(ctx context.Context, client *spool.Client, counter *CompletionCounter, handled *atomic.Int64) error {
	return WaitDrainedQueue(ctx, client, spool.DefaultQueue, counter, handled)
}

// WithCause prefers the context's cause (the --timeout message) when the
// context ended.
func WithCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

// PerJobUS is d per job in microseconds.
func PerJobUS(d time.Duration, jobs int) float64 {
	return float64(d.Microseconds()) / float64(jobs)
}

// manyText describes the many-worker, "" for one job per run.
func manyText(r *drainResult) string {
	if r.Many == 0 {
		return ""
	}
	return fmt.Sprintf("up to %d jobs per call, waiting up to %s", r.Many, r.ManyWait)
}

// requestText describes the service a run calls, "" for none.
func requestText(r *drainResult) string {
	if r.Request == "" || r.Request == "0s" {
		return ""
	}
	return fmt.Sprintf("%s, %d connections", r.Request, r.RequestConns)
}

// usText writes a per-job CPU time, "" when it was not measured.
func usText(us float64) string {
	if us == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f µs", us)
}

// callsText is n calls with a mean of inFlight in flight, or "" when not
// counted.
func callsText(n uint64, inFlight float64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d (%.2f)", n, inFlight)
}

// printDrainResult prints the result as a small table.
func printDrainResult(w io.Writer, r *drainResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"scenario", r.Scenario},
		{"jobs", fmt.Sprint(r.Jobs)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"jobs/s", cli.HumanInt(r.JobsPerS)},
		{"insert jobs/s", cli.HumanInt(r.InsertJobsPerS)},
		{"client CPU per job", usText(r.ClientCPUPerJobUS)},
		{"server CPU per job", usText(r.ServerCPUPerJobUS)},
		{"  of it, its sessions", usText(r.SessionCPUPerJobUS)},
		{"claims (in flight)", callsText(r.Claims, r.ClaimsInFlight)},
		{"outcome writes (in flight)", callsText(r.Writes, r.WritesInFlight)},
		{"workers", fmt.Sprint(r.Workers)},
		{"prefetch", fmt.Sprint(r.Prefetch)},
		{"batch", fmt.Sprint(r.Batch)},
		{"many", manyText(r)},
		{"request per run", requestText(r)},
		{"completion delay", r.CompletionDelay},
		{"delete completed", fmt.Sprint(r.DeleteCompleted)},
		{"backend", r.Backend},
		{"strategy", r.Strategy},
		{"store", r.Store},
	} {
		if row[1] == "" {
			continue // e.g. no claim strategy to choose on SQLite
		}
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchDrainCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench drain --jobs N [flags]

Creates a scratch schema, inserts N no-op jobs with InsertMany (timed
separately), then starts one client with a no-op worker on the default queue
and measures the wall time from Start until every completion is written.
Progress is drawn on stderr; the results go to stdout.

Flags:

	--jobs N
		number of jobs (required)
	--workers N
		MaxWorkers of the queue (default 100)
	--prefetch N
		Prefetch of the queue; 0 disables prefetch (default 3000: claims of
		about 1,500 jobs, which paid the claim's round trips less often than
		claims of 500 at 1000)
	--batch N
		CompletionBatchMax, outcomes per write (default 2000)
	--completion-delay DURATION
		CompletionDelay, how long the outcome writer waits to fill a batch (default 0s)
	--delete-completed
		delete jobs as they complete (CompletedRetention < 0)
	--insert-chunk N
		jobs per insert call (default 10000)
	--insert-fast
		insert with InsertManyFast (COPY, no ids) instead of InsertMany
	--many N
		work the jobs with a many-worker (spool.AddManyWorker) taking up
		to N jobs per call instead of a worker of one job per run; each job
		of a call holds one of the --workers slots (default 0: one per run)
	--many-wait DURATION
		the many-worker's MaxWait (default 0s)
	--request DURATION
		each handler run makes one request to a service that takes this
		long and has --request-conns connections (a request holds one):
		once per job, or once per call with --many, as a handler sends a
		call's jobs in one request (default 0s: no-op jobs)
	--waiting N
		first insert workflows holding N tasks that wait in the drained
		queue throughout (each workflow's root is in a queue no client
		works), to compare a drain with waiting rows beside it against one
		without (default 0)
	--request-conns N
		connections of that service (default 4)
	--strategy pessimistic|optimistic
		claim strategy (spool_claim URL parameter; default: the backend's)
`+PlotUsage+CommonUsage, "\n")
}
