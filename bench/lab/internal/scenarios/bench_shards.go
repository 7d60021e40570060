package scenarios

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func init() {
	registerBenchScenario("shards", "drain one queue spread over 1…N PostgreSQL clusters of its own (backend/shard); each server's CPU per job",
		func(m *cli.Env) cli.Command { return &BenchShardsCommand{m: m} })
}

// BenchShardsCommand starts N PostgreSQL clusters (durable, as installed)
// and, for 1, 2, … N of them, drains one queue spread over them by a
// sharded backend, measuring each server's CPU. On one machine the servers
// share its CPUs, so the drain rate alone cannot show how sharding scales;
// the busiest server's CPU per job can: it is what bounds the rate when
// each server has machines of its own.
type BenchShardsCommand struct{ m *cli.Env }

// shardsStep is one drain over n shards.
type shardsStep struct {
	Shards int `json:"shards"`
	// Direct is the drain on the first cluster through its own backend,
	// without the shard layer: what the layer costs, beside it.
	Direct   bool    `json:"direct,omitempty"`
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// ClientCPUPerJobUS is this process's CPU per job; ServerCPUPerJobUS
	// every server's together; ShardCPUPerJobUS each server's, per job of
	// the whole drain.
	ClientCPUPerJobUS float64   `json:"client_cpu_per_job_us"`
	ServerCPUPerJobUS float64   `json:"server_cpu_per_job_us"`
	ShardCPUPerJobUS  []float64 `json:"shard_cpu_per_job_us"`
	// ServerBoundJobsPerS is the rate the busiest server's CPU allows, each
	// server having a core of its own: jobs ÷ its CPU seconds.
	ServerBoundJobsPerS float64 `json:"server_bound_jobs_per_s"`
	// Jobs each shard held.
	ShardJobs []int64 `json:"shard_jobs"`
}

// shardsResult is the outcome of lab shards, as printed with --json.
type shardsResult struct {
	Scenario  string       `json:"scenario"`
	Placement string       `json:"placement"`
	Jobs      int          `json:"jobs"`
	Rounds    int          `json:"rounds"`
	Workers   int          `json:"workers"`
	Prefetch  int          `json:"prefetch"`
	Durable   bool         `json:"durable"`
	Steps     []shardsStep `json:"steps"`
	Runs      []shardsStep `json:"runs"`
}

// Run implements cli.Command.
func (c *BenchShardsCommand) Run(ctx context.Context, args []string) error {
	r := bench.NewScenarioRun(c.m, "shards")
	maxShards := r.Flags.Int("shards", 3, "most clusters; the drain runs over 1, 2, … of them")
	jobs := r.Flags.Int("jobs", 50000, "jobs per drain")
	rounds := r.Flags.Int("rounds", 1, "drains per shard count (medians; the order alternates)")
	placement := r.Flags.String("placement", "key", "key (the queue spans every shard) or queue (one queue per shard)")
	q := r.AddQueueFlags(bench.DefaultPrefetch)
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	checks := append([]bench.Check{
		bench.Want(*maxShards >= 1 && *maxShards <= 8, "--shards must be between 1 and 8"),
		bench.Want(*jobs >= 1000, "--jobs must be at least 1000"),
		bench.Want(*rounds >= 1 && *rounds <= 9, "--rounds must be between 1 and 9"),
		bench.Want(*placement == "key" || *placement == "queue", "--placement must be key or queue"),
	}, q.Checks()...)
	if err := r.Check(checks...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	clusters, err := dbserver.StartClusters(ctx, *maxShards, "spool-shards-", dbserver.Options{Durable: true})
	if err != nil {
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	r.AtEnd(func() { _ = clusters.Stop() })
	servers := clusters.Servers
	if err := r.StartProfile(); err != nil {
		return err
	}
	res := shardsResult{Scenario: "shards", Placement: *placement, Jobs: *jobs, Rounds: *rounds,
		Workers: *q.Workers, Prefetch: *q.Prefetch, Durable: true}
	// Step 0 is the direct drain; steps 1… the sharded ones.
	byCount := map[int][]shardsStep{}
	for round := range *rounds {
		for k := range *maxShards + 1 {
			n := k
			if round%2 == 1 {
				n = *maxShards - k
			}
			step, err := runShardsStep(ctx, r, q, servers[:max(n, 1)], *jobs, *placement, n == 0)
			if err != nil {
				return bench.WithCause(ctx, fmt.Errorf("%s: %s: %w", r.Name, stepName(n), err))
			}
			fmt.Fprintf(r.Stderr, "%s: %s: %.0f jobs/s, busiest server %.1f µs/job\n", r.Name, stepName(n), step.JobsPerS, slices.Max(step.ShardCPUPerJobUS))
			res.Runs = append(res.Runs, *step)
			byCount[n] = append(byCount[n], *step)
		}
	}
	for n := 0; n <= *maxShards; n++ {
		res.Steps = append(res.Steps, medianShardsStep(byCount[n]))
	}
	return r.Finish(res, func(w io.Writer) error { return printShards(w, &res) }, func() *plot.Figure { return shardsFigure(&res) })
}

func stepName(n int) string {
	if n == 0 {
		return "direct"
	}
	return fmt.Sprintf("%d shards", n)
}

// runShardsStep drains jobs spread over servers, each on a fresh schema;
// direct drains on the one server through its own backend.
func runShardsStep(ctx context.Context, r *bench.ScenarioRun, q *bench.QueueFlags, servers []*dbserver.Postgres, jobs int, placement string, direct bool) (*shardsStep, error) {
	shards := make([]backend.Backend, len(servers))
	pools := make([]*pgxpool.Pool, len(servers))
	defer func() {
		for _, p := range pools {
			if p != nil {
				_, _ = p.Exec(context.Background(), "DROP SCHEMA IF EXISTS spool_bench_shards CASCADE")
				p.Close()
			}
		}
	}()
	for i, s := range servers {
		pool, err := pgxpool.New(ctx, s.URL())
		if err != nil {
			return nil, err
		}
		pools[i] = pool
		pg, err := postgres.New(pool, &postgres.Options{Schema: "spool_bench_shards"})
		if err != nil {
			return nil, err
		}
		if err := pg.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("migrate shard %d: %w", i, err)
		}
		shards[i] = pg
	}
	opts := &shard.Options{Placement: shard.ByKey}
	queues := []string{spool.DefaultQueue}
	if placement == "queue" {
		// One queue on each shard, pinned so that each holds one.
		opts = &shard.Options{Queues: map[string]int{}}
		queues = queues[:0]
		for i := range servers {
			name := fmt.Sprintf("shard%d", i)
			opts.Queues[name] = i
			queues = append(queues, name)
		}
	}
	sb, err := shard.New(shards, opts)
	if err != nil {
		return nil, err
	}
	var inner backend.Backend = sb
	if direct {
		inner, queues = shards[0], []string{spool.DefaultQueue}
	}
	be, counter := bench.CountCompletions(inner, int64(jobs))
	client, handled, err := q.NoopClient(be, r, queues...)
	if err != nil {
		return nil, err
	}
	per := jobs / len(queues)
	for i, queue := range queues {
		n := per
		if i == len(queues)-1 {
			n = jobs - per*(len(queues)-1)
		}
		var inserted atomic.Int64
		if _, err := bench.InsertJobs(ctx, client, queue, n, *q.Chunk, true, &inserted); err != nil {
			return nil, err
		}
	}
	cpu0, _ := bench.ProcessCPU()
	server0 := make([]time.Duration, len(servers))
	for i, s := range servers {
		server0[i], _ = bench.TreeCPU(s.PID())
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = client.Stop(context.Background()) }()
	if err := bench.WaitDrainedQueue(ctx, client, queues[0], counter, handled); err != nil {
		return nil, err
	}
	elapsed := counter.DoneAt.Sub(start)
	cpu1, _ := bench.ProcessCPU()
	step := &shardsStep{Shards: len(servers), Direct: direct, Seconds: elapsed.Seconds(), JobsPerS: cli.Rate(int64(jobs), elapsed),
		ClientCPUPerJobUS: bench.PerJobUS(cpu1-cpu0, jobs)}
	var busiest time.Duration
	for i, s := range servers {
		t, _ := bench.TreeCPU(s.PID())
		d := t - server0[i]
		busiest = max(busiest, d)
		step.ShardCPUPerJobUS = append(step.ShardCPUPerJobUS, bench.PerJobUS(d, jobs))
		step.ServerCPUPerJobUS += bench.PerJobUS(d, jobs)
	}
	if busiest > 0 {
		step.ServerBoundJobsPerS = float64(jobs) / busiest.Seconds()
	}
	if err := client.Stop(ctx); err != nil {
		return nil, err
	}
	stats := make([]int64, len(servers))
	for i, s := range shards {
		qs, err := s.QueueStatsAll(ctx)
		if err != nil {
			return nil, err
		}
		for _, x := range qs {
			stats[i] += x.Counts[backend.StateCompleted]
			if pending := bench.PendingCount(x); pending != 0 {
				return nil, fmt.Errorf("shard %d: %d jobs of queue %s left pending", i, pending, x.Queue)
			}
		}
	}
	step.ShardJobs = stats
	var sum int64
	for _, n := range stats {
		sum += n
	}
	if sum != int64(jobs) {
		return nil, fmt.Errorf("%d jobs completed on the shards, want %d", sum, jobs)
	}
	return step, nil
}

// medianShardsStep takes each figure's median over the runs.
func medianShardsStep(runs []shardsStep) shardsStep {
	pick := func(f func(shardsStep) float64) float64 {
		vs := make([]float64, len(runs))
		for i, s := range runs {
			vs[i] = f(s)
		}
		return bench.Median(vs)
	}
	out := runs[0]
	out.Seconds = pick(func(s shardsStep) float64 { return s.Seconds })
	out.JobsPerS = pick(func(s shardsStep) float64 { return s.JobsPerS })
	out.ClientCPUPerJobUS = pick(func(s shardsStep) float64 { return s.ClientCPUPerJobUS })
	out.ServerCPUPerJobUS = pick(func(s shardsStep) float64 { return s.ServerCPUPerJobUS })
	out.ServerBoundJobsPerS = pick(func(s shardsStep) float64 { return s.ServerBoundJobsPerS })
	out.ShardCPUPerJobUS = make([]float64, len(runs[0].ShardCPUPerJobUS))
	for i := range out.ShardCPUPerJobUS {
		out.ShardCPUPerJobUS[i] = pick(func(s shardsStep) float64 { return s.ShardCPUPerJobUS[i] })
	}
	return out
}

func printShards(w io.Writer, r *shardsResult) error {
	fmt.Fprintf(w, "one queue over 1…%d PostgreSQL clusters (placement by %s), %d jobs, %d workers, median of %d\n\n",
		len(r.Steps)-1, r.Placement, r.Jobs, r.Workers, r.Rounds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "shards\tjobs/s\tclient µs/job\tservers µs/job\teach server µs/job\tserver-bound jobs/s\t\n")
	for _, s := range r.Steps {
		each := ""
		for i, v := range s.ShardCPUPerJobUS {
			if i > 0 {
				each += " "
			}
			each += fmt.Sprintf("%.1f", v)
		}
		name := fmt.Sprint(s.Shards)
		if s.Direct {
			name = "direct"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%s\t%.0f\t\n", name, s.JobsPerS, s.ClientCPUPerJobUS, s.ServerCPUPerJobUS, each, s.ServerBoundJobsPerS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\ndirect: one cluster through its own backend, without the shard layer.\nserver-bound jobs/s: jobs ÷ the busiest server's CPU seconds, the rate the servers allow when each has a core of its own.")
	return err
}

func shardsFigure(r *shardsResult) *plot.Figure {
	var measured, bound []plot.Point
	for _, s := range r.Steps {
		if s.Direct {
			continue
		}
		measured = append(measured, plot.Point{X: float64(s.Shards), Y: s.JobsPerS})
		bound = append(bound, plot.Point{X: float64(s.Shards), Y: s.ServerBoundJobsPerS})
	}
	return &plot.Figure{
		Title: fmt.Sprintf("shards: %d jobs over PostgreSQL clusters of its own (placement by %s)", r.Jobs, r.Placement),
		Charts: []*plot.Chart{{Title: "Drain rate on this machine, and the rate the busiest server's CPU allows", XLabel: "shards", YLabel: "jobs/s", XFromZero: true,
			Lines: []plot.Line{{Name: "drain here", Points: measured, Markers: true}, {Name: "server-bound", Points: bound, Markers: true}}}},
	}
}

// Usage implements cli.Command.
func (c *BenchShardsCommand) Usage() string {
	return `Usage: lab shards [flags]

Starts --shards PostgreSQL clusters of its own (initdb under a temporary
directory, fsync on, each on a port of its own) and drains --jobs no-op
jobs over 1, 2, … of them through one sharded backend (backend/shard): by
default one queue spread over every shard by key (jobs without a key go
round robin), or with --placement queue one queue pinned to each shard.

It reports the drain rate, this process's CPU per job, and each server's
CPU per job. All servers share this machine's CPUs, so the rate here is
bounded by the machine; the busiest server's CPU per job shows what each
server would do with a machine of its own ("server-bound jobs/s").

Needs PostgreSQL 15's initdb and pg_ctl (/usr/lib/postgresql/15/bin) and
root or the postgres user.

	--shards N
		most clusters; drains run over 1, 2, … N of them (default 3)
	--jobs N
		jobs per drain (default 50000)
	--placement key|queue
		key: one queue spread over every shard, jobs without a key round
		robin (default); queue: one queue pinned to each shard, each with
		its own --workers and --prefetch
	--rounds N
		drains per shard count, in alternating order; each figure is the
		median (default 1)
	--workers N
		MaxWorkers of each queue (default 100)
	--prefetch N
		Prefetch of each queue (default 1000)
	--batch N
		CompletionBatchMax (default 2000)
	--completion-delay DURATION
		CompletionDelay (default 0s)
	--delete-completed
		delete jobs as they complete
	--insert-chunk N
		jobs per insert call (default 10000)
	--json
		print only a JSON object with the results and settings on stdout
	--quiet
		draw no progress on stderr
	--timeout DURATION
		give up after this long (default 0: no limit)
	--cpuprofile FILE
		write a Go CPU profile of the drains to FILE (go tool pprof)
` + bench.PlotUsage
}
