package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("scale", "drain rate with 10⁴…10⁷ runnable jobs queued behind the measured ones",
		func(m *cli.Env) cli.Command { return &BenchScaleCommand{m: m} })
}

// BenchScaleCommand measures how the drain rate holds up as the queue grows:
// for each backlog size, a fresh store gets that many runnable jobs of the
// lowest precedence (priority 100), then the measured jobs (priority 0),
// and one client drains the measured jobs while the backlog waits behind
// them in the same queue and the same claim index.
type BenchScaleCommand struct{ m *cli.Env }

// scaleBacklogArgs is the args of the backlog's jobs.
type scaleBacklogArgs struct{}

// Kind implements spool.JobArgs.
func (scaleBacklogArgs) Kind() string { return "spool_bench_backlog" }

// backlogPriority puts the backlog behind the measured jobs (priority 0).
const backlogPriority = 100

// scaleStallTimeout is how long a scale drain may go without a completion
// before it is declared stuck.
const scaleStallTimeout = 60 * time.Second

// scaleRow is the result for one backlog size.
type scaleRow struct {
	Backlog       int64     `json:"backlog"`
	BacklogInsert float64   `json:"backlog_insert_jobs_per_s"` // first round
	SettleS       float64   `json:"settle_s"`                  // first round; 0 when not settled
	JobsPerS      float64   `json:"jobs_per_s"`                // median over rounds
	Runs          []float64 `json:"runs_jobs_per_s"`
	Ratio         float64   `json:"ratio_to_first"` // JobsPerS over the first backlog's
	// RateOverTime is the drain rate in 200 ms windows of the first round:
	// [seconds since start, jobs/s].
	RateOverTime [][2]float64 `json:"rate_over_time"`
}

// scaleResult is the outcome of bench scale, as printed with --json.
type scaleResult struct {
	Scenario        string     `json:"scenario"`
	Backend         string     `json:"backend"`
	Jobs            int        `json:"jobs"`
	Rounds          int        `json:"rounds"`
	Settled         bool       `json:"settled"`
	Backlogs        []scaleRow `json:"backlogs"`
	Stores          []string   `json:"stores"` // the scratch stores used, in order
	Workers         int        `json:"workers"`
	Prefetch        int        `json:"prefetch"`
	Batch           int        `json:"batch"`
	CompletionDelay string     `json:"completion_delay"`
	DeleteCompleted bool       `json:"delete_completed"`
	GOMAXPROCS      int        `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchScaleCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench scale")
	backlogList := r.Flags.String("backlogs", "1e4,1e5,1e6,1e7", "comma-separated backlog sizes")
	jobs := r.Flags.Int("jobs", 100000, "measured jobs drained per backlog")
	q := r.AddQueueFlags(DefaultPrefetch)
	settle := r.Flags.Bool("settle", true, "update the table statistics after inserting, before the clock starts")
	rounds := r.Flags.Int("rounds", 1, "rounds over all backlogs")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	backlogs, err := ParseCountList(*backlogList)
	if err != nil {
		return cli.Usagef(r.Name, "--backlogs: %v", err)
	}
	if err := r.Check(append(append([]Check{Want(*jobs >= 1, "--jobs must be at least 1")}, q.Checks()...),
		Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"))...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	if err := r.StartProfile(); err != nil {
		return err
	}

	run := &scaleRun{r: r, jobs: *jobs, chunk: *q.Chunk, settle: *settle, config: q.Config()}
	res := scaleResult{
		Scenario: "scale", Jobs: *jobs, Rounds: *rounds, Settled: *settle,
		Workers: *q.Workers, Prefetch: *q.Prefetch, Batch: *q.Batch, CompletionDelay: q.Delay.String(),
		DeleteCompleted: *q.DeleteCompleted, GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	for _, b := range backlogs {
		res.Backlogs = append(res.Backlogs, scaleRow{Backlog: b})
	}
	for round := range *rounds {
		for i := range res.Backlogs {
			row := &res.Backlogs[i]
			out, err := run.one(ctx, row.Backlog)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench scale: backlog %s: %w", cli.HumanInt(float64(row.Backlog)), err))
			}
			res.Backend = out.backend
			res.Stores = append(res.Stores, out.store)
			row.Runs = append(row.Runs, out.jobsPerS)
			if round == 0 {
				row.BacklogInsert, row.SettleS = out.backlogInsert, out.settle.Seconds()
				for _, p := range ratePoints(out.samples, 200*time.Millisecond) {
					row.RateOverTime = append(row.RateOverTime, [2]float64{p.X, p.Y})
				}
			}
		}
	}
	for i := range res.Backlogs {
		res.Backlogs[i].JobsPerS = Median(res.Backlogs[i].Runs)
		if first := res.Backlogs[0].JobsPerS; first > 0 {
			res.Backlogs[i].Ratio = res.Backlogs[i].JobsPerS / first
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printScaleResult(w, &res) },
		func() *plot.Figure { return scaleFigure(&res) })
}

// queuePrefetch maps the --prefetch flag (0: none) to QueueConfig.Prefetch
// (negative: none, 0: as MaxWorkers).
func queuePrefetch(flagValue int) int {
	if flagValue == 0 {
		return -1
	}
	return flagValue
}

// retentionFor maps --delete-completed to CompletedRetention.
func retentionFor(deleteCompleted bool) time.Duration {
	if deleteCompleted {
		return -1
	}
	return 0
}

// scaleRun holds the settings of one bench scale invocation.
type scaleRun struct {
	r      *ScenarioRun
	jobs   int
	chunk  int
	settle bool
	config spool.Config // Queues and completion settings; the rest is set per run
}

// scaleOutcome is one backlog's run.
type scaleOutcome struct {
	backend       string
	store         string
	backlogInsert float64 // jobs/s
	settle        time.Duration
	jobsPerS      float64
	samples       []countSample
}

// one runs one backlog size on a fresh store.
func (r *scaleRun) one(ctx context.Context, backlog int64) (out scaleOutcome, err error) {
	store, closeStore, err := r.r.OpenStoreFor(ctx)
	if err != nil {
		return out, err
	}
	defer func() {
		if cerr := closeStore(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	out.backend, out.store = store.Backend.Name(), store.Scratch.Name
	counter := &measuredCounter{Backend: store.Backend, Capabilities: Capabilities{store.Backend}, target: int64(r.jobs), done: make(chan struct{})}
	ws := spool.NewWorkers()
	for _, err := range []error{
		spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[Noop]) error { return nil })),
		spool.AddWorkerSafely(ws, spool.WorkFunc(func(context.Context, *spool.Job[scaleBacklogArgs]) error { return nil })),
	} {
		if err != nil {
			return out, err
		}
	}
	cfg := r.config
	cfg.Workers = ws
	cfg.Logger = r.r.Logger()
	client, err := spool.NewClient(KeepNotifier(counter, store.Backend), &cfg)
	if err != nil {
		return out, err
	}
	progressTo := r.r.Common.ProgressWriter(r.r.Stderr)

	// The backlog, behind everything: COPY where the backend has it.
	var inserted atomic.Int64
	bar := r.r.Progress("backlog", "jobs", backlog, inserted.Load)
	began := time.Now()
	err = insertChunks(ctx, backlog, r.chunk, &inserted, func(n int) error {
		_, err := client.InsertManyFast(ctx, repeatParams(scaleBacklogArgs{}, &spool.InsertOpts{Priority: backlogPriority}, n))
		return err
	})
	bar.Stop()
	if err != nil {
		return out, fmt.Errorf("insert backlog: %w", err)
	}
	out.backlogInsert = cli.Rate(backlog, time.Since(began))

	// The measured jobs, first in line; their ids tell their completions
	// from the backlog's.
	inserted.Store(0)
	bar = r.r.Progress("insert", "jobs", int64(r.jobs), inserted.Load)
	firstID := int64(-1)
	err = insertChunks(ctx, int64(r.jobs), r.chunk, &inserted, func(n int) error {
		res, err := client.InsertMany(ctx, repeatParams(Noop{}, &spool.InsertOpts{}, n))
		if err == nil && firstID < 0 {
			firstID = res[0].ID
		}
		return err
	})
	bar.Stop()
	if err != nil {
		return out, fmt.Errorf("insert measured jobs: %w", err)
	}
	counter.minID.Store(firstID)

	if probe := probeFor(store.Backend); r.settle && probe.settle != nil {
		began := time.Now()
		fmt.Fprintf(progressTo, "settle: statistics of %s jobs…\n", cli.HumanInt(float64(backlog)+float64(r.jobs)))
		if err := probe.settle(ctx, store.Backend); err != nil {
			return out, err
		}
		out.settle = time.Since(began)
	}

	sampler := startCounterSampler(counter.Written, 100*time.Millisecond)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		sampler.Stop()
		return out, err
	}
	defer stopClient(r.r.Env.Stderr, r.r.Name, client)
	bar = r.r.Progress("drain", "jobs", int64(r.jobs), counter.Written)
	err = counter.wait(ctx)
	bar.Stop()
	out.samples = sampler.Stop()
	if err != nil {
		return out, err
	}
	out.jobsPerS = cli.Rate(int64(r.jobs), counter.doneAt.Sub(start))
	return out, nil
}

// insertChunks calls insert with chunk sizes that add up to n, counting in
// inserted.
func insertChunks(ctx context.Context, n int64, chunk int, inserted *atomic.Int64, insert func(n int) error) error {
	for done := int64(0); done < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := int(min(int64(chunk), n-done))
		if err := insert(k); err != nil {
			return err
		}
		done += int64(k)
		inserted.Store(done)
	}
	return nil
}

// repeatParams returns n insert params of the same args and options.
func repeatParams(args spool.JobArgs, opts *spool.InsertOpts, n int) []spool.InsertManyParams {
	ps := make([]spool.InsertManyParams, n)
	for i := range ps {
		ps[i] = spool.InsertManyParams{Args: args, InsertOpts: opts}
	}
	return ps
}

// measuredCounter wraps a backend and counts the completions written for
// jobs with ids from minID on: the measured jobs, not the backlog.
type measuredCounter struct {
	backend.Backend
	Capabilities
	minID   atomic.Int64
	target  int64
	written atomic.Int64
	once    sync.Once
	done    chan struct{}
	doneAt  time.Time // set before done is closed
}

// JobFinishMany implements backend.Backend.
func (c *measuredCounter) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	res, err := c.Backend.JobFinishMany(ctx, p)
	if err != nil {
		return res, err
	}
	minID := c.minID.Load()
	n := int64(res.CountApplied(p, func(f backend.JobFinish) bool { return f.Outcome == backend.OutcomeComplete && f.Lease.ID >= minID }))
	if n > 0 && c.written.Add(n) >= c.target {
		c.once.Do(func() {
			c.doneAt = time.Now()
			close(c.done)
		})
	}
	return res, nil
}

// Written returns the measured completions written so far.
func (c *measuredCounter) Written() int64 { return c.written.Load() }

// wait waits for the target, giving up when no completion is written for
// scaleStallTimeout.
func (c *measuredCounter) wait(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := int64(-1), time.Now()
	for {
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("interrupted at %d of %d completions: %w", c.Written(), c.target, ctx.Err())
		case now := <-tick.C:
			if w := c.Written(); w != last {
				last, lastChange = w, now
			} else if now.Sub(lastChange) > scaleStallTimeout {
				return fmt.Errorf("stalled at %d of %d completions", w, c.target)
			}
		}
	}
}

// scaleFigure draws the rate per backlog and the rate over time.
func scaleFigure(r *scaleResult) *plot.Figure {
	var bars []plot.Bar
	var lines []plot.Line
	for _, b := range r.Backlogs {
		label := cli.HumanInt(float64(b.Backlog))
		bars = append(bars, plot.Bar{Label: label, Value: b.JobsPerS,
			Note: fmt.Sprintf("%s (%.2f×)", plot.FormatValue(b.JobsPerS), b.Ratio)})
		pts := make([]plot.Point, len(b.RateOverTime))
		for i, p := range b.RateOverTime {
			pts[i] = plot.Point{X: p[0], Y: p[1]}
		}
		lines = append(lines, plot.Line{Name: label, Points: pts})
	}
	return &plot.Figure{
		Title: fmt.Sprintf("scale: draining %s jobs with a backlog queued behind (%s)", cli.HumanInt(float64(r.Jobs)), r.Backend),
		Charts: []*plot.Chart{
			{Title: "Drain rate by backlog (ratio to the smallest)", XLabel: "jobs queued behind", YLabel: "jobs/s", Bars: bars},
			{Title: "Drain rate over time (200 ms windows, first round)", XLabel: "time since start (s)", YLabel: "jobs/s",
				XFromZero: true, Lines: lines},
		},
	}
}

// printScaleResult prints one row per backlog.
func printScaleResult(w io.Writer, r *scaleResult) error {
	fmt.Fprintf(w, "scale: %s measured jobs per backlog, %d round(s), settled %v, %s\n\n",
		cli.HumanInt(float64(r.Jobs)), r.Rounds, r.Settled, r.Backend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKLOG\tJOBS/S\tRATIO\tRUNS\tBACKLOG INSERT JOBS/S\tSETTLE")
	for _, b := range r.Backlogs {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\t%.1fs\n", cli.HumanInt(float64(b.Backlog)), cli.HumanInt(b.JobsPerS), b.Ratio,
			FormatRuns(b.Runs), cli.HumanInt(b.BacklogInsert), b.SettleS)
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchScaleCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench scale [flags]

For each backlog size, on a fresh scratch store: inserts the backlog as
runnable jobs of the lowest precedence (priority 100, with InsertManyFast:
COPY on PostgreSQL), then --jobs measured jobs at priority 0 in the same
queue (InsertMany), brings the table's statistics up to date (--settle:
VACUUM ANALYZE on PostgreSQL, ANALYZE TABLE on MySQL; as a queue that has
lived with its backlog would be), then times one
client draining the measured jobs, as bench drain does, until their last
completion is written. The backlog stays behind them in the same claim
index, so what grows is the index and the table, not the work. Prints
jobs/s per backlog and the ratio to the first (smallest) backlog.

10⁷ jobs take minutes to insert and several GB of disk: choose with
--backlogs.

Flags:

	--backlogs LIST
		comma-separated backlog sizes, in order (default 1e4,1e5,1e6,1e7)
	--jobs N
		measured jobs drained per backlog (default 100000)
	--settle
		update the statistics before the clock starts (default true;
		--settle=false measures a freshly loaded table)
	--rounds N
		rounds over all backlogs; the table shows medians (default 1)
	--workers N
		MaxWorkers of the queue (default 100)
	--prefetch N
		Prefetch of the queue; 0 disables prefetch (default 1000)
	--batch N
		CompletionBatchMax (default 2000)
	--completion-delay DURATION
		CompletionDelay (default 0s)
	--delete-completed
		delete jobs as they complete
	--insert-chunk N
		jobs per insert call (default 10000)
`+PlotUsage+CommonUsage, "\n")
}
