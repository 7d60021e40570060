package bench

import (
	"context"
	"fmt"
	"io"
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
	registerScenario("steps", "drain jobs of 5 durable no-op steps against plain jobs (paired), and time signal to resume",
		func(m *cli.Env) cli.Command { return &BenchStepsCommand{m: m} })
}

// BenchStepsCommand measures durable steps and signals (docs/durable.md).
type BenchStepsCommand struct{ m *cli.Env }

// stepsJob is the bench's job: Steps no-op durable steps, or, with Await,
// a wait for the signal "go".
type stepsJob struct {
	Steps int  `json:"steps,omitempty"`
	Await bool `json:"await,omitempty"`
	Park  int  `json:"park,omitempty"` // 1: Sleep an hour, 2: AwaitSignal "never" for an hour
}

// Kind implements spool.JobArgs.
func (stepsJob) Kind() string { return "spool_bench_steps" }

// stepsResult is the outcome of bench steps, as printed with --json.
type stepsResult struct {
	Scenario      string    `json:"scenario"`
	Backend       string    `json:"backend"`
	Store         string    `json:"store"`
	Jobs          int       `json:"jobs"`
	Steps         int       `json:"steps"`
	Rounds        int       `json:"rounds"`
	Workers       int       `json:"workers"`
	PlainJobsPerS []float64 `json:"plain_jobs_per_s"`
	StepsJobsPerS []float64 `json:"steps_jobs_per_s"`
	Ratios        []float64 `json:"ratios"`
	MedianRatio   float64   `json:"median_ratio"`
	// CPU time per job of each round's drains, in microseconds: this
	// process's, that of the machine's database servers (PostgreSQL and
	// MySQL; other sessions' work included), and that of the server
	// processes of the store's own sessions (PostgreSQL only): unlike
	// rates, not raised by other work on the machine.
	PlainClientCPUUS  []float64    `json:"plain_client_cpu_per_job_us,omitempty"`
	StepsClientCPUUS  []float64    `json:"steps_client_cpu_per_job_us,omitempty"`
	PlainServerCPUUS  []float64    `json:"plain_server_cpu_per_job_us,omitempty"`
	StepsServerCPUUS  []float64    `json:"steps_server_cpu_per_job_us,omitempty"`
	PlainSessionCPUUS []float64    `json:"plain_session_cpu_per_job_us,omitempty"`
	StepsSessionCPUUS []float64    `json:"steps_session_cpu_per_job_us,omitempty"`
	Signals           int          `json:"signals"`
	SignalRate        int          `json:"signal_rate"`
	SentPerS          float64      `json:"signals_sent_per_s"`
	Resume            LatencyStats `json:"signal_to_resume"`
	// Parked jobs beside plain drains (--parked): the plain drain's rate
	// in a store without them and in one with them, by round.
	Parked          int       `json:"parked,omitempty"`
	ParkSeconds     float64   `json:"park_seconds,omitempty"`
	BareJobsPerS    []float64 `json:"bare_jobs_per_s,omitempty"`
	BesideJobsPerS  []float64 `json:"beside_parked_jobs_per_s,omitempty"`
	ParkedRatios    []float64 `json:"parked_ratios,omitempty"`
	ParkedMedianRat float64   `json:"parked_median_ratio,omitempty"`
}

// parkAll runs a client until the n inserted jobs are parked (scheduled);
// byInsert: they were inserted so.
func parkAll(ctx context.Context, r *ScenarioRun, be backend.Backend, inserter *spool.Client, cfg *spool.Config, n int, byInsert bool) error {
	if byInsert {
		return nil
	}
	_, stop, err := startUntilParked(ctx, r, be, inserter, cfg, n)
	if err == nil {
		stop()
	}
	return err
}

// startUntilParked starts a client of cfg on be and waits until n jobs of
// the default queue are scheduled (parked by its handlers); stop stops it.
func startUntilParked(ctx context.Context, r *ScenarioRun, be backend.Backend, inserter *spool.Client, cfg *spool.Config, n int) (*spool.Client, func(), error) {
	client, err := spool.NewClient(be, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, nil, err
	}
	stop := func() { stopClient(r.Env.Stderr, r.Name, client) }
	for {
		stats, err := QueueStats(ctx, inserter, spool.DefaultQueue)
		if err == nil && stats.Counts[backend.StateScheduled] < int64(n) {
			err = sleepCtx(ctx, 20*time.Millisecond)
			if err == nil {
				continue
			}
		}
		if err != nil {
			stop()
			return nil, nil, err
		}
		return client, stop, nil
	}
}

// drainTarget is a store the bench drains jobs in: its backend and a
// client that inserts.
type drainTarget struct {
	be       backend.Backend
	inserter *spool.Client
}

// benchParked opens two fresh scratch stores, parks n jobs in the second
// (half in Sleep, half in AwaitSignal, an hour each, through the handler
// as any job parks), then drains jobs plain no-op jobs in the first (no
// parked job) and in the second (beside the parked ones), alternating by
// round, in the queue the parked jobs wait in: the two stores differ only
// by the parked jobs (the steps drains' store holds their completed jobs
// and step records, which a drain beside them pays for). byInsert inserts
// the parked jobs scheduled an hour ahead, the state Sleep leaves a job in
// (without its step record), which is faster than parking them.
func benchParked(ctx context.Context, r *ScenarioRun, cfg *spool.Config, n int, byInsert bool, rounds, jobs int,
	drainIn func(*drainTarget, int, int) (float64, error), res *stepsResult) error {
	var targets [2]*drainTarget
	for i := range targets {
		store, err := r.openStore(ctx)
		if err != nil {
			return err
		}
		inserter, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
		if err != nil {
			return err
		}
		targets[i] = &drainTarget{be: store.Backend, inserter: inserter}
	}
	bare, beside := targets[0], targets[1]
	store, inserter := beside.be, beside.inserter
	began := time.Now()
	for done := 0; done < n; {
		k := min(n-done, 5000)
		params := make([]spool.InsertManyParams, k)
		for i := range params {
			params[i] = spool.InsertManyParams{Args: stepsJob{Park: 1 + (done+i)%2}}
			if byInsert {
				params[i].InsertOpts = &spool.InsertOpts{Delay: time.Hour}
			}
		}
		if _, err := inserter.InsertMany(ctx, params); err != nil {
			return err
		}
		done += k
	}
	if err := parkAll(ctx, r, store, inserter, cfg, n, byInsert); err != nil {
		return err
	}
	res.Parked, res.ParkSeconds = n, time.Since(began).Seconds()
	fmt.Fprintf(r.Stderr, "parked %d jobs in %.1f s\n", n, res.ParkSeconds)
	for round := range rounds {
		order := []*drainTarget{bare, beside}
		if round%2 == 1 {
			order = []*drainTarget{beside, bare}
		}
		var without, with float64
		for _, t := range order {
			rate, err := drainIn(t, jobs, 0)
			if err != nil {
				return err
			}
			if t == bare {
				without = rate
			} else {
				with = rate
			}
		}
		res.BareJobsPerS = append(res.BareJobsPerS, without)
		res.BesideJobsPerS = append(res.BesideJobsPerS, with)
		res.ParkedRatios = append(res.ParkedRatios, with/without)
		fmt.Fprintf(r.Stderr, "parked round %d: plain %.0f jobs/s alone, %.0f beside %d parked, ratio %.2f\n", round+1, without, with, n, with/without)
	}
	res.ParkedMedianRat = Median(res.ParkedRatios)
	return nil
}

// Run implements cli.Command.
func (c *BenchStepsCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench steps")
	jobs := r.Flags.Int("jobs", 5000, "jobs per drain")
	steps := r.Flags.Int("steps", 5, "durable steps per job")
	rounds := r.Flags.Int("rounds", 3, "paired rounds (plain, then steps, order alternating)")
	signals := r.Flags.Int("signals", 2000, "parked jobs to signal (0: skip)")
	rate := r.Flags.Int("signal-rate", 1000, "signals per second")
	workers := r.Flags.Int("workers", 100, "MaxWorkers of the queue")
	parked := r.Flags.Int("parked", 0, "jobs parked in Sleep and AwaitSignal beside paired plain drains (0: skip)")
	parkInsert := r.Flags.Bool("park-by-insert", false, "with --parked: insert the parked jobs scheduled an hour ahead instead of parking them through their handlers")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(Want(*jobs >= 1, "--jobs must be at least 1"), Want(*steps >= 1 && *steps <= 100, "--steps must be 1 to 100"),
		Want(*rounds >= 1, "--rounds must be at least 1"), Want(*signals >= 0, "--signals must not be negative"),
		Want(*rate >= 1, "--signal-rate must be at least 1"), Want(*parked >= 0, "--parked must not be negative"), Want(*workers >= 1, "--workers must be at least 1")); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	names := make([]string, *steps)
	for i := range names {
		names[i] = fmt.Sprintf("step-%d", i+1)
	}
	var sentAt sync.Map // job id → time.Time the signal was sent
	resumed := make(chan time.Duration, max(*signals, 1))
	var handled atomic.Int64 // handler runs, for WaitDrainedQueue's stall check
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[stepsJob]) error {
		handled.Add(1)
		switch j.Args.Park {
		case 1:
			return spool.Sleep(ctx, time.Hour)
		case 2:
			_, err := spool.AwaitSignal(ctx, "never", time.Hour)
			return err
		}
		if j.Args.Await {
			if _, err := spool.AwaitSignal(ctx, "go", time.Hour); err != nil {
				return err
			}
			if at, ok := sentAt.Load(j.ID); ok {
				resumed <- time.Since(at.(time.Time))
			}
			return nil
		}
		for i := range j.Args.Steps {
			if _, err := spool.Step(ctx, names[i], func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		return nil
	})); err != nil {
		return err
	}
	cfg := spool.Config{
		Workers: ws, Logger: r.Logger(),
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *workers, Prefetch: queuePrefetch(DefaultPrefetch)}},
	}
	inserter, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
	if err != nil {
		return fmt.Errorf("bench steps: %w", err)
	}
	res := stepsResult{Scenario: "steps", Backend: store.Backend.Name(), Store: store.Scratch.Name, Jobs: *jobs,
		Steps: *steps, Rounds: *rounds, Workers: *workers, Signals: *signals, SignalRate: *rate}
	main := &drainTarget{be: store.Backend, inserter: inserter}
	var lastClientCPU, lastServerCPU, lastSessionCPU float64 // per job, of the last drain in main
	drainIn := func(t *drainTarget, n, steps int) (float64, error) {
		params := make([]spool.InsertManyParams, n)
		for i := range params {
			params[i] = spool.InsertManyParams{Args: stepsJob{Steps: steps}}
		}
		if _, err := t.inserter.InsertMany(ctx, params); err != nil {
			return 0, err
		}
		// Completions are counted as the client writes them, as bench
		// drain does: a count of the store's jobs every few milliseconds
		// took one of the server's cores (69 ms a count beside 200,000
		// jobs), more the longer a drain ran.
		be, counter := CountCompletions(t.be, int64(n))
		client, err := spool.NewClient(be, &cfg)
		if err != nil {
			return 0, err
		}
		var cpu cpuSpan
		if t == main {
			cpu = startCPUSpan(func() []int { return store.sessionPIDs(ctx) })
		}
		start := time.Now()
		if err := client.Start(ctx); err != nil {
			return 0, err
		}
		defer stopClient(r.Env.Stderr, r.Name, client)
		if err := WaitDrainedQueue(ctx, client, spool.DefaultQueue, counter, &handled); err != nil {
			return 0, err
		}
		if t == main {
			lastClientCPU, lastServerCPU, lastSessionCPU = cpu.perJob(n, store.Backend.Name())
		}
		return cli.Rate(int64(n), counter.DoneAt.Sub(start)), nil
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	for round := range *rounds {
		order := []int{0, *steps}
		if round%2 == 1 {
			order = []int{*steps, 0}
		}
		var plain, stepped float64
		for _, s := range order {
			rate, err := drainIn(main, *jobs, s)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench steps: drain: %w", err))
			}
			if s == 0 {
				plain = rate
				res.PlainClientCPUUS = append(res.PlainClientCPUUS, lastClientCPU)
				res.PlainServerCPUUS = append(res.PlainServerCPUUS, lastServerCPU)
				res.PlainSessionCPUUS = append(res.PlainSessionCPUUS, lastSessionCPU)
			} else {
				stepped = rate
				res.StepsClientCPUUS = append(res.StepsClientCPUUS, lastClientCPU)
				res.StepsServerCPUUS = append(res.StepsServerCPUUS, lastServerCPU)
				res.StepsSessionCPUUS = append(res.StepsSessionCPUUS, lastSessionCPU)
			}
		}
		res.PlainJobsPerS = append(res.PlainJobsPerS, plain)
		res.StepsJobsPerS = append(res.StepsJobsPerS, stepped)
		res.Ratios = append(res.Ratios, stepped/plain)
		k := len(res.PlainClientCPUUS) - 1
		fmt.Fprintf(r.Stderr, "round %d: plain %.0f jobs/s, %d steps %.0f jobs/s, ratio %.2f; CPU per job, client %.1f / %.1f µs, servers %.1f / %.1f µs, server sessions %.1f / %.1f µs\n",
			round+1, plain, *steps, stepped, stepped/plain, res.PlainClientCPUUS[k], res.StepsClientCPUUS[k],
			res.PlainServerCPUUS[k], res.StepsServerCPUUS[k], res.PlainSessionCPUUS[k], res.StepsSessionCPUUS[k])
	}
	res.MedianRatio = Median(res.Ratios)
	if *parked > 0 {
		if err := benchParked(ctx, r, &cfg, *parked, *parkInsert, *rounds, *jobs, drainIn, &res); err != nil {
			return WithCause(ctx, fmt.Errorf("bench steps: parked: %w", err))
		}
	}
	if *signals > 0 {
		if err := benchSignals(ctx, r, store.Backend, inserter, &cfg, *signals, *rate, &sentAt, resumed, &res); err != nil {
			return WithCause(ctx, fmt.Errorf("bench steps: signals: %w", err))
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printStepsResult(w, &res) }, func() *plot.Figure { return nil })
}

// benchSignals parks n jobs in AwaitSignal, then signals them at rate per
// second from a second client (as another process would) and records how
// long each took from its signal's send to its handler's resumption.
func benchSignals(ctx context.Context, r *ScenarioRun, be backend.Backend, inserter *spool.Client, cfg *spool.Config,
	n, rate int, sentAt *sync.Map, resumed chan time.Duration, res *stepsResult) error {
	params := make([]spool.InsertManyParams, n)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: stepsJob{Await: true}}
	}
	ins, err := inserter.InsertMany(ctx, params)
	if err != nil {
		return err
	}
	_, stop, err := startUntilParked(ctx, r, be, inserter, cfg, n)
	if err != nil {
		return err
	}
	defer stop()
	ids := make(chan int64)
	var wg sync.WaitGroup
	var sendErr atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				sentAt.Store(id, time.Now())
				if _, err := inserter.Signal(ctx, id, "go", nil); err != nil {
					sendErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	start := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for _, j := range ins {
		<-tick.C
		ids <- j.ID
	}
	tick.Stop()
	close(ids)
	wg.Wait()
	res.SentPerS = cli.Rate(int64(n), time.Since(start))
	if err, _ := sendErr.Load().(error); err != nil {
		return err
	}
	lat := make([]time.Duration, 0, n)
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for len(lat) < n {
		select {
		case d := <-resumed:
			lat = append(lat, d)
		case <-timeout.C:
			return fmt.Errorf("%d of %d signalled jobs resumed within a minute", len(lat), n)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	res.Resume = Summarize(lat)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func printStepsResult(w io.Writer, r *stepsResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"scenario", r.Scenario},
		{"backend", r.Backend},
		{"jobs per drain", fmt.Sprint(r.Jobs)},
		{"steps per job", fmt.Sprint(r.Steps)},
		{"plain jobs/s", FormatRuns(r.PlainJobsPerS)},
		{"steps jobs/s", FormatRuns(r.StepsJobsPerS)},
		{"ratios", FormatRuns(r.Ratios)},
		{"median ratio", fmt.Sprintf("%.2f", r.MedianRatio)},
		{"client CPU per job, plain", FormatRuns(r.PlainClientCPUUS)},
		{"client CPU per job, steps", FormatRuns(r.StepsClientCPUUS)},
	}
	if r.Backend != "sqlite" {
		rows = append(rows, [][2]string{
			{"servers' CPU per job, plain", FormatRuns(r.PlainServerCPUUS)},
			{"servers' CPU per job, steps", FormatRuns(r.StepsServerCPUUS)},
		}...)
	}
	if r.Backend == "postgres" {
		rows = append(rows, [][2]string{
			{"server sessions' CPU per job, plain", FormatRuns(r.PlainSessionCPUUS)},
			{"server sessions' CPU per job, steps", FormatRuns(r.StepsSessionCPUUS)},
		}...)
	}
	if r.Signals > 0 {
		rows = append(rows, [][2]string{
			{"signals", fmt.Sprintf("%d at %d/s (sent at %.0f/s)", r.Signals, r.SignalRate, r.SentPerS)},
			{"signal→resume p50", fmt.Sprintf("%.1f ms", r.Resume.P50)},
			{"signal→resume p99", fmt.Sprintf("%.1f ms", r.Resume.P99)},
			{"signal→resume max", fmt.Sprintf("%.1f ms", r.Resume.Max)},
		}...)
	}
	if r.Parked > 0 {
		rows = append(rows, [][2]string{
			{"parked jobs", fmt.Sprintf("%d (parked in %.1f s)", r.Parked, r.ParkSeconds)},
			{"plain jobs/s, no parked", FormatRuns(r.BareJobsPerS)},
			{"plain jobs/s, beside parked", FormatRuns(r.BesideJobsPerS)},
			{"parked ratios", FormatRuns(r.ParkedRatios)},
			{"parked median ratio", fmt.Sprintf("%.2f", r.ParkedMedianRat)},
		}...)
	}
	rows = append(rows, [2]string{"store", r.Store})
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchStepsCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench steps [flags]

Creates a scratch schema and measures durable steps (docs/durable.md):

  1. Paired drains: in each round, N plain no-op jobs and N jobs of
     --steps no-op durable steps (spool.Step, each recorded as it returns)
     are inserted and drained by a fresh client, the order alternating by
     round; it prints each side's rate and the median of the rounds'
     ratios (steps / plain).
  2. Signal to resume: --signals jobs park in AwaitSignal; once all are
     parked, a second client signals them at --signal-rate per second, and
     each handler's resumption is timed from its signal's send.
  3. With --parked N: two fresh scratch stores, the second with N jobs
     parked by their handlers (half in Sleep, half in AwaitSignal, an
     hour each); each round drains --jobs plain jobs in the first and in
     the second (beside the parked jobs, in their queue), the order
     alternating; it prints both rates and the median ratio.

Flags:

	--jobs N
		jobs per drain (default 5000)
	--steps N
		durable steps per job (default 5)
	--rounds N
		paired rounds (default 3)
	--signals N
		parked jobs to signal; 0 skips the signal phase (default 2000)
	--signal-rate N
		signals per second (default 1000)
	--workers N
		MaxWorkers of the queue (default 100)
	--parked N
		jobs parked beside paired plain drains; 0 skips (default 0)
	--park-by-insert
		insert the parked jobs scheduled an hour ahead (the state a
		Sleep leaves) instead of parking them through their handlers
`+CommonUsage, "\n")
}
