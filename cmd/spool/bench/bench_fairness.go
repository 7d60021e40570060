package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("fairness", "a big and a small backlog under weighted fair share: each group's share of starts while both have work, and the small group's pickup",
		func(m *cli.Env) cli.Command { return &BenchFairnessCommand{m: m} })
}

// BenchFairnessCommand measures weighted fair share (Flow.FairShare): a
// big backlog is inserted first and a small one after it, and the starts
// are counted while both have work.
type BenchFairnessCommand struct{ m *cli.Env }

// fairGroup is one group (flow key) of a run.
type fairGroup struct {
	Key           string        `json:"key"`
	Backlog       int           `json:"backlog"`
	Weight        int           `json:"weight"`
	ExpectedShare float64       `json:"expected_share"`
	Share         float64       `json:"share"`
	Starts        int           `json:"starts"`
	Pickup        *LatencyStats `json:"pickup,omitempty"` // from its insert to its start, the small group only
	// FirstStartMS is when the group's first job started, from the
	// client's start: how long the other group's backlog held it back.
	FirstStartMS float64 `json:"first_start_ms"`
}

// fairRun is one weighting of bench fairness.
type fairRun struct {
	Weights string      `json:"weights"`
	Groups  []fairGroup `json:"groups"`
	// Seconds is how long both groups had work (until the small group's
	// last start); JobsPerS the starts per second then.
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// series is the share of starts per bucket, per group, for the chart.
	series map[string][]plot.Point
}

// fairResult is the outcome of bench fairness, as printed with --json.
type fairResult struct {
	Scenario   string    `json:"scenario"`
	Backend    string    `json:"backend"`
	Store      string    `json:"store"`
	Kept       bool      `json:"kept"`
	Clients    int       `json:"clients"`
	Workers    int       `json:"workers"`
	Runs       []fairRun `json:"runs"`
	GOMAXPROCS int       `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchFairnessCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench fairness")
	big := r.Flags.Int("big", 1_000_000, "backlog of the big group, inserted first")
	small := r.Flags.Int("small", 1_000, "backlog of the small group, inserted after the big one")
	weights := r.Flags.String("weights", "1:1,3:1", "runs, each the big and the small group's weights")
	clients := r.Flags.Int("clients", 1, "clients working the queue")
	workers := r.Flags.Int("workers", 100, "MaxWorkers of each client")
	bucket := r.Flags.Duration("bucket", 10*time.Millisecond, "width of the chart's time buckets")
	chunk := r.Flags.Int("insert-chunk", 10000, "jobs per insert call")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	runs, werr := parseWeightPairs(*weights)
	if err := r.Check(
		Want(*big >= 1, "--big must be at least 1"),
		Want(*small >= 1, "--small must be at least 1"),
		Want(werr == nil, "--weights: %v", werr),
		Want(*clients >= 1 && *clients <= 64, "--clients must be between 1 and 64"),
		Want(*workers >= 1 && *workers <= 10000, "--workers must be between 1 and 10000"),
		Want(*bucket >= time.Millisecond, "--bucket must be at least 1ms"),
		Want(*chunk >= 1, "--insert-chunk must be at least 1"),
	); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	res := fairResult{Scenario: "fairness", Backend: store.Backend.Name(), Store: store.Scratch.Name, Kept: store.Keep,
		Clients: *clients, Workers: *workers, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for i, w := range runs {
		run, err := c.run(ctx, r, store, fmt.Sprintf("spool_bench_fair_%d", i), w, *big, *small, *clients, *workers, *bucket, *chunk)
		if err != nil {
			return err
		}
		res.Runs = append(res.Runs, run)
	}
	return r.Finish(res, func(w io.Writer) error { return printFairResult(w, &res) },
		func() *plot.Figure { return fairFigure(&res, *bucket) })
}

// parseWeightPairs parses "1:1,3:1".
func parseWeightPairs(s string) ([][2]int, error) {
	var out [][2]int
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(part), ":")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || x < 1 || y < 1 || x > 1000 || y > 1000 {
			return nil, fmt.Errorf("%q is not BIG:SMALL weights of 1 to 1000", part)
		}
		out = append(out, [2]int{x, y})
	}
	return out, nil
}

// fairStart is one handler start.
type fairStart struct {
	small bool
	at    time.Time
}

// run inserts the backlogs into queue and works them under the weights
// until the small group has started every job.
func (c *BenchFairnessCommand) run(ctx context.Context, r *ScenarioRun, store *Store, queue string, w [2]int,
	big, small, clients, workers int, bucket time.Duration, chunk int) (fairRun, error) {
	var (
		mu        sync.Mutex
		starts    = make([]fairStart, 0, 4*small)
		smallSeen int
		smallDone = make(chan struct{})
	)
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[benchFlow]) error {
		isSmall := j.Args.Key == "small"
		mu.Lock()
		if smallSeen < small {
			starts = append(starts, fairStart{small: isSmall, at: time.Now()})
			if isSmall {
				if smallSeen++; smallSeen == small {
					close(smallDone)
				}
			}
		}
		mu.Unlock()
		return nil
	})); err != nil {
		return fairRun{}, err
	}
	flow := &spool.Flow{FairShare: true, Weights: map[string]int{"big": w[0], "small": w[1]}}
	var cs []*spool.Client
	for range clients {
		cl, err := spool.NewClient(store.Backend, &spool.Config{Workers: ws, Logger: r.Logger(),
			Queues: map[string]spool.QueueConfig{queue: {MaxWorkers: workers, Flow: flow}}})
		if err != nil {
			return fairRun{}, fmt.Errorf("%s: %w", r.Name, err)
		}
		cs = append(cs, cl)
	}
	name := fmt.Sprintf("%d:%d", w[0], w[1])
	if err := insertGroup(ctx, r, cs[0], queue, "big", big, chunk); err != nil {
		return fairRun{}, WithCause(ctx, err)
	}
	smallAt := time.Now()
	if err := insertGroup(ctx, r, cs[0], queue, "small", small, chunk); err != nil {
		return fairRun{}, WithCause(ctx, err)
	}
	start := time.Now()
	for _, cl := range cs {
		if err := cl.Start(ctx); err != nil {
			return fairRun{}, fmt.Errorf("%s: %w", r.Name, err)
		}
	}
	bar := r.Progress("weights "+name+": small group", "jobs", int64(small), func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return int64(smallSeen)
	})
	select {
	case <-smallDone:
	case <-ctx.Done():
	}
	bar.Stop()
	for _, cl := range cs {
		stopClient(r.Stderr, r.Name, cl)
	}
	if ctx.Err() != nil {
		return fairRun{}, WithCause(ctx, fmt.Errorf("%s: interrupted before the small group ran", r.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	last := starts[len(starts)-1].at
	run := fairRun{Weights: name, Seconds: last.Sub(start).Seconds(), series: map[string][]plot.Point{}}
	run.JobsPerS = cli.Rate(int64(len(starts)), last.Sub(start))
	var nSmall int
	var pickups []time.Duration
	first := map[bool]time.Duration{}
	type cell struct{ big, small int }
	cells := map[int]*cell{}
	maxB := 0
	for _, s := range starts {
		if _, ok := first[s.small]; !ok {
			first[s.small] = s.at.Sub(start)
		}
		b := int(s.at.Sub(start) / bucket)
		if cells[b] == nil {
			cells[b] = &cell{}
		}
		maxB = max(maxB, b)
		if s.small {
			nSmall++
			cells[b].small++
			pickups = append(pickups, s.at.Sub(smallAt))
		} else {
			cells[b].big++
		}
	}
	for b := 0; b <= maxB; b++ {
		cl := cells[b]
		if cl == nil || cl.big+cl.small == 0 {
			continue
		}
		x := (time.Duration(b)*bucket + bucket/2).Seconds()
		n := float64(cl.big + cl.small)
		run.series["big"] = append(run.series["big"], plot.Point{X: x, Y: float64(cl.big) / n})
		run.series["small"] = append(run.series["small"], plot.Point{X: x, Y: float64(cl.small) / n})
	}
	total := float64(len(starts))
	sum := float64(w[0] + w[1])
	pick := Summarize(pickups)
	run.Groups = []fairGroup{
		{Key: "big", Backlog: big, Weight: w[0], ExpectedShare: float64(w[0]) / sum, Share: float64(len(starts)-nSmall) / total, Starts: len(starts) - nSmall,
			FirstStartMS: MS(first[false])},
		{Key: "small", Backlog: small, Weight: w[1], ExpectedShare: float64(w[1]) / sum, Share: float64(nSmall) / total, Starts: nSmall, Pickup: &pick,
			FirstStartMS: MS(first[true])},
	}
	return run, nil
}

// insertGroup inserts n jobs of one flow key.
func insertGroup(ctx context.Context, r *ScenarioRun, client *spool.Client, queue, key string, n, chunk int) error {
	var done int64
	bar := r.Progress("insert "+key, "jobs", int64(n), func() int64 { return done })
	defer bar.Stop()
	opts := &spool.InsertOpts{Queue: queue}
	params := make([]spool.InsertManyParams, min(n, chunk))
	for i := range params {
		params[i] = spool.InsertManyParams{Args: benchFlow{Key: key}, InsertOpts: opts}
	}
	for int(done) < n {
		k := min(chunk, n-int(done))
		if _, err := client.InsertManyFast(ctx, params[:k]); err != nil {
			return fmt.Errorf("bench: insert jobs: %w", err)
		}
		done += int64(k)
	}
	return nil
}

// printFairResult prints each run's groups as a table.
func printFairResult(w io.Writer, r *fairResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "weights\tgroup\tbacklog\tweight\tshare\texpected\tfirst start ms\tpickup p50 ms\tpickup p99 ms")
	for _, run := range r.Runs {
		for _, g := range run.Groups {
			p50, p99 := "-", "-"
			if g.Pickup != nil {
				p50, p99 = fmtMS(g.Pickup.P50), fmtMS(g.Pickup.P99)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3f\t%.3f\t%s\t%s\t%s\n", run.Weights, g.Key, g.Backlog, g.Weight, g.Share, g.ExpectedShare, fmtMS(g.FirstStartMS), p50, p99)
		}
		fmt.Fprintf(tw, "%s\tboth had work for %.2f s, %s starts/s\t\t\t\t\t\t\t\n", run.Weights, run.Seconds, cli.HumanInt(run.JobsPerS))
	}
	fmt.Fprintf(tw, "clients\t%d × %d workers\n", r.Clients, r.Workers)
	fmt.Fprintf(tw, "backend\t%s\nstore\t%s\n", r.Backend, r.Store)
	return tw.Flush()
}

// fairFigure draws, per run, each group's share of the starts over time.
func fairFigure(r *fairResult, bucket time.Duration) *plot.Figure {
	f := &plot.Figure{Title: fmt.Sprintf("fair share of starts while both groups have work (%s)", r.Backend)}
	for _, run := range r.Runs {
		ch := &plot.Chart{Title: "weights big:small " + run.Weights, XLabel: "seconds", YLabel: "share of starts per " + bucket.String(),
			Y: plot.Range{Min: 0, Max: 1}, XFromZero: true}
		for _, g := range run.Groups {
			ch.Lines = append(ch.Lines, plot.Line{Name: fmt.Sprintf("%s (weight %d)", g.Key, g.Weight), Points: run.series[g.Key]})
		}
		f.Charts = append(f.Charts, ch)
	}
	return f
}

// Usage implements cli.Command.
func (c *BenchFairnessCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench fairness [flags]

Measures weighted fair share (Flow.FairShare, docs/flow.md). For each pair
of --weights it inserts a backlog of --big jobs of flow key "big" and then
--small jobs of key "small" into a queue of its own, and works them with
--clients clients until the small group has started every job. Prints each
group's weight, its share of the starts while both groups had work beside
the share its weight asks for, when its first job started, and the small
group's pickup (from the end of the big backlog's insert to each start).
Without fair share the small group's first job would wait for the whole
big backlog.

Flags:

	--big N
		backlog of the big group (default 1000000)
	--small N
		backlog of the small group (default 1000)
	--weights LIST
		runs, each BIG:SMALL weights (default 1:1,3:1)
	--clients N
		clients working the queue (default 1)
	--workers N
		MaxWorkers of each client (default 100)
	--bucket DURATION
		width of the chart's time buckets (default 10ms)
	--insert-chunk N
		jobs per insert call (default 10000)
`+CommonUsage, "\n")
}
