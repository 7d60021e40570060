package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("prune", "a drain alone, then a drain while JobsPrune deletes N finished jobs beside it; claim latency and rate of each",
		func(m *cli.Env) cli.Command { return &BenchPruneCommand{m: m} })
}

// BenchPruneCommand measures what retention costs the hot path: it fills
// the store with finished jobs, times a drain with them in place, then
// times a second drain while Client.JobsPrune deletes them in batches.
type BenchPruneCommand struct{ m *cli.Env }

// pruneQueue holds the finished jobs that are pruned.
const pruneQueue = "spool_bench_finished"

// prunePhase is one drain of bench prune.
type prunePhase struct {
	Name     string       `json:"name"`
	Jobs     int          `json:"jobs"`
	Seconds  float64      `json:"seconds"`
	JobsPerS float64      `json:"jobs_per_s"`
	Claim    LatencyStats `json:"claim_latency"`
}

// pruneResult is the outcome of bench prune, as printed with --json.
type pruneResult struct {
	Scenario      string       `json:"scenario"`
	Backend       string       `json:"backend"`
	Store         string       `json:"store"`
	Kept          bool         `json:"kept"`
	Finished      int          `json:"finished"`
	SeedSeconds   float64      `json:"seed_seconds"`
	Pruned        int          `json:"pruned"`
	PruneBatch    int          `json:"prune_batch"`
	PrunePause    string       `json:"prune_pause"`
	PruneSeconds  float64      `json:"prune_seconds"`
	PruneRowsPerS float64      `json:"prune_rows_per_s"`
	Phases        []prunePhase `json:"phases"`
	ClaimP99x     float64      `json:"claim_p99_ratio"`  // while pruning / alone
	JobsPerSx     float64      `json:"jobs_per_s_ratio"` // while pruning / alone
	Workers       int          `json:"workers"`
	Prefetch      int          `json:"prefetch"`
	GOMAXPROCS    int          `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchPruneCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench prune")
	finished := r.Flags.Int("finished", 1_000_000, "finished jobs to seed and then prune")
	jobs := r.Flags.Int("jobs", 100_000, "jobs in each drain")
	pruneBatch := r.Flags.Int("prune-batch", 10_000, "jobs JobsPrune deletes per transaction")
	prunePause := r.Flags.Duration("prune-pause", 0, "pause between JobsPrune's batches")
	q := r.AddQueueFlags(DefaultPrefetch)
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(append([]Check{
		Want(*finished >= 1, "--finished must be at least 1"),
		Want(*jobs >= 1, "--jobs must be at least 1"),
		Want(*pruneBatch >= 1 && *pruneBatch <= 100_000, "--prune-batch must be between 1 and 100000"),
		Want(*prunePause >= 0, "--prune-pause must not be negative"),
	}, q.Checks()...)...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	admin, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
	if err != nil {
		return fmt.Errorf("bench prune: %w", err)
	}

	// Seed: finished jobs, cancelled so that they are final at once.
	seedStart := time.Now()
	var inserted atomic.Int64
	bar := r.Progress("seed", "jobs", int64(*finished), inserted.Load)
	if _, err := InsertJobs(ctx, admin, pruneQueue, *finished, *q.Chunk, true, &inserted); err != nil {
		bar.Stop()
		return WithCause(ctx, err)
	}
	bar.Stop()
	if res, err := admin.JobsCancel(ctx, spool.JobFilter{Queue: pruneQueue, BatchSize: 10_000}); err != nil || res.Changed != *finished {
		return WithCause(ctx, fmt.Errorf("bench prune: finish the seeded jobs: %d of %d, %v", res.Changed, *finished, err))
	}
	seedTime := time.Since(seedStart)

	res := pruneResult{
		Scenario: "prune", Backend: store.Backend.Name(), Store: store.Scratch.Name, Kept: store.Keep,
		Finished: *finished, SeedSeconds: seedTime.Seconds(), PruneBatch: *pruneBatch, PrunePause: prunePause.String(),
		Workers: *q.Workers, Prefetch: *q.Prefetch, GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	// A millisecond after the last cancellation, every seeded job is old
	// enough for the prune.
	time.Sleep(2 * time.Millisecond)

	alone, err := c.drain(ctx, r, store, q, "drain alone", *jobs, nil)
	if err != nil {
		return err
	}
	var (
		pruned    int
		pruneErr  error
		pruneTime time.Duration
		pruneDone = make(chan struct{})
	)
	during, err := c.drain(ctx, r, store, q, "drain while pruning", *jobs, func() {
		go func() {
			defer close(pruneDone)
			start := time.Now()
			pruned, pruneErr = admin.JobsPrune(ctx, spool.PruneParams{
				States: []spool.JobState{spool.JobStateCancelled}, OlderThan: time.Millisecond, BatchSize: *pruneBatch, Pause: *prunePause})
			pruneTime = time.Since(start)
		}()
	})
	if err != nil {
		return err
	}
	<-pruneDone
	if pruneErr != nil || pruned != *finished {
		return WithCause(ctx, fmt.Errorf("bench prune: pruned %d of %d: %v", pruned, *finished, pruneErr))
	}
	res.Pruned, res.PruneSeconds, res.PruneRowsPerS = pruned, pruneTime.Seconds(), cli.Rate(int64(pruned), pruneTime)
	res.Phases = []prunePhase{alone, during}
	if alone.Claim.P99 > 0 {
		res.ClaimP99x = during.Claim.P99 / alone.Claim.P99
	}
	if alone.JobsPerS > 0 {
		res.JobsPerSx = during.JobsPerS / alone.JobsPerS
	}
	return r.Finish(res, func(w io.Writer) error { return printPruneResult(w, &res) },
		func() *plot.Figure { return pruneFigure(&res) })
}

// pruneFigure draws each drain's rate and claim p99 side by side.
func pruneFigure(r *pruneResult) *plot.Figure {
	rate := &plot.Chart{Title: "drain rate", YLabel: "jobs/s"}
	p99 := &plot.Chart{Title: "claim latency p99", YLabel: "ms"}
	for _, p := range r.Phases {
		rate.Bars = append(rate.Bars, plot.Bar{Label: p.Name, Value: p.JobsPerS, Note: cli.HumanInt(p.JobsPerS)})
		p99.Bars = append(p99.Bars, plot.Bar{Label: p.Name, Value: p.Claim.P99, Note: fmtMS(p.Claim.P99)})
	}
	return &plot.Figure{
		Title:  fmt.Sprintf("pruning %d finished jobs beside a drain (%s)", r.Pruned, r.Backend),
		Charts: []*plot.Chart{rate, p99},
	}
}

// drain inserts n no-op jobs and times a client working them all; beside,
// when not nil, runs once the client has started.
func (c *BenchPruneCommand) drain(ctx context.Context, r *ScenarioRun, store *Store, q *QueueFlags, name string, n int, beside func()) (prunePhase, error) {
	base := time.Now()
	timed, timer := timeClaims(store.Backend, base)
	be, counter := CountCompletions(timed, int64(n))
	client, handled, err := q.NoopClient(be, r)
	if err != nil {
		return prunePhase{}, err
	}
	var inserted atomic.Int64
	bar := r.Progress("insert", "jobs", int64(n), inserted.Load)
	_, err = InsertJobs(ctx, client, spool.DefaultQueue, n, *q.Chunk, true, &inserted)
	bar.Stop()
	if err != nil {
		return prunePhase{}, WithCause(ctx, err)
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return prunePhase{}, fmt.Errorf("bench prune: %w", err)
	}
	if beside != nil {
		beside()
	}
	bar = r.Progress(name, "jobs", int64(n), counter.Written)
	err = waitDrained(ctx, client, counter, handled)
	bar.Stop()
	elapsed := counter.DoneAt.Sub(start)
	stopClient(r.Stderr, r.Name, client)
	if err != nil {
		return prunePhase{}, WithCause(ctx, err)
	}
	var claims []time.Duration
	for _, s := range timer.Samples() {
		if !s.err {
			claims = append(claims, s.d)
		}
	}
	return prunePhase{Name: name, Jobs: n, Seconds: elapsed.Seconds(), JobsPerS: cli.Rate(int64(n), elapsed), Claim: Summarize(claims)}, nil
}

// printPruneResult prints the result as a small table.
func printPruneResult(w io.Writer, r *pruneResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "finished jobs\t%d (seeded in %.1f s)\n", r.Finished, r.SeedSeconds)
	fmt.Fprintf(tw, "pruned\t%d in %.1f s (%s rows/s, batches of %d)\n", r.Pruned, r.PruneSeconds, cli.HumanInt(r.PruneRowsPerS), r.PruneBatch)
	fmt.Fprintln(tw, "phase\tjobs/s\tclaim p50 ms\tclaim p99 ms\tclaim max ms")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, cli.HumanInt(p.JobsPerS), fmtMS(p.Claim.P50), fmtMS(p.Claim.P99), fmtMS(p.Claim.Max))
	}
	fmt.Fprintf(tw, "while pruning / alone\tjobs/s ×%.2f\t\tclaim p99 ×%.2f\n", r.JobsPerSx, r.ClaimP99x)
	fmt.Fprintf(tw, "backend\t%s\nstore\t%s\n", r.Backend, r.Store)
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchPruneCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench prune [flags]

Measures what retention costs the hot path. It seeds --finished finished
jobs (inserted, then cancelled), times a drain of --jobs no-op jobs with them
in place, then times a second drain of --jobs while Client.JobsPrune deletes
the finished jobs in batches of --prune-batch beside it. Prints each drain's
rate and claim latency, the prune's rate, and the ratios.

Flags:

	--finished N
		finished jobs to seed and prune (default 1000000)
	--jobs N
		jobs in each drain (default 100000)
	--prune-batch N
		jobs deleted per transaction (default 10000)
	--prune-pause DURATION
		pause between the prune's batches (default 0s)
	--workers N
		MaxWorkers of the queue (default 100)
	--prefetch N
		Prefetch of the queue; 0 disables prefetch (default 1000)
	--batch N
		CompletionBatchMax, outcomes per write (default 2000)
	--completion-delay DURATION
		CompletionDelay (default 0s)
	--delete-completed
		delete jobs as they complete (CompletedRetention < 0)
	--insert-chunk N
		jobs per insert call (default 10000)
`+CommonUsage, "\n")
}
