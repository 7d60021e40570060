package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
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
	registerScenario("limits", "drains with no limit, with limits that do not bind and with a global, per-key and rate limit that do; rate and the concurrency the handlers saw",
		func(m *cli.Env) cli.Command { return &BenchLimitsCommand{m: m} })
}

// BenchLimitsCommand measures flow control: what a limit costs a drain when
// it does not bind, and that one that binds is never exceeded, counted by
// the handlers themselves (concurrency) and by the store's start times
// (rates).
type BenchLimitsCommand struct{ m *cli.Env }

// benchFlow is the args of flow benchmarks' jobs; its key is its flow key.
type benchFlow struct {
	Key string `json:"k,omitempty"`
}

// Kind implements spool.JobArgs.
func (benchFlow) Kind() string { return "spool_bench_flow" }

// FlowKey implements spool.JobArgsWithFlowKey.
func (a benchFlow) FlowKey() string { return a.Key }

// limitsPhase is one drain of bench limits.
type limitsPhase struct {
	Name  string `json:"name"`
	Limit string `json:"limit"`
	// Bound is the most the limit allows (jobs at once, or starts per
	// window); 0 for none.
	Bound    int     `json:"bound"`
	Binds    bool    `json:"binds"`
	Jobs     int     `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// JobsPerSRatio is the rate's ratio to the baseline (the median of its
	// rounds' ratios for the phases run in rounds).
	JobsPerSRatio         float64   `json:"jobs_per_s_ratio"`
	Rounds                int       `json:"rounds,omitempty"`
	RoundRatios           []float64 `json:"round_ratios,omitempty"`
	MaxConcurrentObserved int       `json:"max_concurrent_observed"`
	MaxPerKeyObserved     int       `json:"max_concurrent_per_key_observed,omitempty"`
	// MaxStartsPerWindow is the most starts (by the store's clock) in any
	// window of the rate's length, for the rate phase.
	MaxStartsPerWindow int  `json:"max_starts_per_window,omitempty"`
	Exceeded           bool `json:"exceeded"`
	// Claim is the claims' latency; JobsPerClaim their mean size.
	Claim        LatencyStats `json:"claim_latency"`
	JobsPerClaim float64      `json:"jobs_per_claim"`
}

// limitsResult is the outcome of bench limits, as printed with --json.
type limitsResult struct {
	Scenario    string        `json:"scenario"`
	Backend     string        `json:"backend"`
	Store       string        `json:"store"`
	Kept        bool          `json:"kept"`
	Clients     int           `json:"clients"`
	Workers     int           `json:"workers"`
	Prefetch    int           `json:"prefetch"`
	JobDuration string        `json:"job_duration"`
	Phases      []limitsPhase `json:"phases"`
	GOMAXPROCS  int           `json:"gomaxprocs"`
}

// limitsPlan is one phase to run.
type limitsPlan struct {
	name, limit string
	flow        *spool.Flow
	keys        int // flow keys the jobs spread over (0: none)
	jobs        int
	bound       int
	binds       bool
	rate        *spool.RateLimit
}

// Run implements cli.Command.
func (c *BenchLimitsCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench limits")
	jobs := r.Flags.Int("jobs", 50_000, "jobs in each concurrency phase")
	clients := r.Flags.Int("clients", 2, "clients working the queue, sharing its limits")
	workers := r.Flags.Int("workers", 50, "MaxWorkers of each client")
	prefetch := r.Flags.Int("prefetch", 50, "Prefetch of each client (0: none)")
	jobDuration := r.Flags.Duration("job-duration", time.Millisecond, "how long each handler holds its slot")
	global := r.Flags.Int("global-limit", 20, "the binding global limit")
	keys := r.Flags.Int("keys", 10, "flow keys of the per-key phases")
	keyLimit := r.Flags.Int("key-limit", 2, "the binding per-key limit")
	rate := r.Flags.Int("rate", 2000, "the binding rate limit, starts per --rate-per")
	ratePer := r.Flags.Duration("rate-per", time.Second, "the rate limit's window")
	rateJobs := r.Flags.Int("rate-jobs", 0, "jobs in the rate phase (default: 3 windows' worth)")
	chunk := r.Flags.Int("insert-chunk", 10000, "jobs per insert call")
	roundsFlag := r.Flags.Int("rounds", 3, "rounds of the baseline and the limits that do not bind")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*jobs >= 1, "--jobs must be at least 1"),
		Want(*clients >= 1 && *clients <= 64, "--clients must be between 1 and 64"),
		Want(*workers >= 1 && *workers <= 10000, "--workers must be between 1 and 10000"),
		Want(*prefetch >= 0 && *prefetch <= 100000, "--prefetch must be between 0 and 100000"),
		Want(*jobDuration >= 0, "--job-duration must not be negative"),
		Want(*global >= 1 && *global < *clients**workers, "--global-limit must be at least 1 and below --clients × --workers, so that it binds"),
		Want(*keys >= 1 && *keys <= 10000, "--keys must be between 1 and 10000"),
		Want(*keyLimit >= 1 && *keyLimit**keys < *clients**workers, "--key-limit must be at least 1, and --key-limit × --keys below --clients × --workers, so that it binds"),
		Want(*rate >= 1 && *rate <= 1_000_000, "--rate must be between 1 and 1000000"),
		Want(*ratePer >= time.Millisecond, "--rate-per must be at least 1ms"),
		Want(*rateJobs >= 0, "--rate-jobs must not be negative"),
		Want(*chunk >= 1, "--insert-chunk must be at least 1"),
		Want(*roundsFlag >= 1 && *roundsFlag <= 100, "--rounds must be between 1 and 100"),
	); err != nil {
		return err
	}
	if *rateJobs == 0 {
		*rateJobs = 3 * *rate
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	// A limit does not bind when it is at least four times what the
	// clients' workers and prefetch buffers hold: prefetch takes only the
	// lower half of a limit's slots (docs/flow.md), and jobs whose outcome
	// is still being written keep their slots meanwhile. At twice, the
	// claims of two clients of 50 workers and 50 prefetch on PostgreSQL
	// averaged 40 jobs against 48 without a limit: the limit bound the
	// prefetch.
	capacity := 4 * *clients * (*workers + *prefetch)
	rl := &spool.RateLimit{Limit: *rate, Per: *ratePer}
	plans := []limitsPlan{
		{name: "none", limit: "none", jobs: *jobs},
		{name: "global, not binding", limit: fmt.Sprintf("global %d", capacity), flow: &spool.Flow{GlobalLimit: capacity}, jobs: *jobs, bound: capacity},
		{name: "per key, not binding", limit: fmt.Sprintf("%d per key, %d keys", capacity, *keys), flow: &spool.Flow{KeyLimit: capacity}, keys: *keys, jobs: *jobs, bound: capacity},
		{name: "global", limit: fmt.Sprintf("global %d", *global), flow: &spool.Flow{GlobalLimit: *global}, jobs: *jobs, bound: *global, binds: true},
		{name: "per key", limit: fmt.Sprintf("%d per key, %d keys", *keyLimit, *keys), flow: &spool.Flow{KeyLimit: *keyLimit}, keys: *keys, jobs: *jobs, bound: *keyLimit, binds: true},
		{name: "rate", limit: fmt.Sprintf("%d per %s", *rate, *ratePer), flow: &spool.Flow{Rate: rl}, jobs: *rateJobs, bound: *rate, binds: true, rate: rl},
	}
	res := limitsResult{Scenario: "limits", Backend: store.Backend.Name(), Store: store.Scratch.Name, Kept: store.Keep,
		Clients: *clients, Workers: *workers, Prefetch: *prefetch, JobDuration: jobDuration.String(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if err := r.StartProfile(); err != nil {
		return err
	}
	// The baseline and the limits that do not bind run in --rounds rounds,
	// side by side, in a rotating order (the machine and the table change
	// during a run); each one's ratio is the median of its ratios to its
	// round's baseline. The binding phases run once, after.
	seq := 0
	run := func(p limitsPlan) (limitsPhase, error) {
		seq++
		return c.phase(ctx, r, store, fmt.Sprintf("spool_bench_limits_%d", seq), p, *clients, *workers, *prefetch, *jobDuration, *chunk)
	}
	paired := plans[:3]
	rounds := make([][]limitsPhase, len(paired))
	for round := range *roundsFlag {
		got := make([]limitsPhase, len(paired))
		for k := range paired {
			i := (k + round) % len(paired)
			ph, err := run(paired[i])
			if err != nil {
				return err
			}
			got[i] = ph
		}
		for i := range paired {
			got[i].JobsPerSRatio = got[i].JobsPerS / got[0].JobsPerS
			rounds[i] = append(rounds[i], got[i])
		}
	}
	for _, rs := range rounds {
		res.Phases = append(res.Phases, medianPhase(rs))
	}
	base := res.Phases[0].JobsPerS
	for _, p := range plans[3:] {
		ph, err := run(p)
		if err != nil {
			return err
		}
		ph.JobsPerSRatio = ph.JobsPerS / base
		res.Phases = append(res.Phases, ph)
	}
	for _, p := range res.Phases {
		if p.Exceeded {
			defer fmt.Fprintf(r.Env.Stderr, "spool: bench limits: phase %q exceeded its limit\n", p.Name)
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printLimitsResult(w, &res) },
		func() *plot.Figure { return limitsFigure(&res) })
}

// medianPhase sums up one phase's rounds: the median rate and ratio, the
// most ever seen at once, and exceeded if any round exceeded.
func medianPhase(rs []limitsPhase) limitsPhase {
	out := rs[0]
	rates, ratios, claims := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	for i, p := range rs {
		rates[i], ratios[i], claims[i] = p.JobsPerS, p.JobsPerSRatio, p.Claim.P50
		out.MaxConcurrentObserved = max(out.MaxConcurrentObserved, p.MaxConcurrentObserved)
		out.MaxPerKeyObserved = max(out.MaxPerKeyObserved, p.MaxPerKeyObserved)
		out.Exceeded = out.Exceeded || p.Exceeded
		out.RoundRatios = append(out.RoundRatios, p.JobsPerSRatio)
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	out.JobsPerS, out.JobsPerSRatio, out.Claim.P50 = median(rates), median(ratios), median(claims)
	out.Rounds = len(rs)
	return out
}

// limitsProbe counts, in the handlers, what runs at once: in all and per
// key.
type limitsProbe struct {
	cur, peak atomic.Int64
	mu        sync.Mutex
	keyCur    map[string]int
	keyPeak   int
}

func (p *limitsProbe) enter(key string) {
	n := p.cur.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	p.mu.Lock()
	p.keyCur[key]++
	p.keyPeak = max(p.keyPeak, p.keyCur[key])
	p.mu.Unlock()
}

func (p *limitsProbe) leave(key string) {
	p.mu.Lock()
	p.keyCur[key]--
	p.mu.Unlock()
	p.cur.Add(-1)
}

// phase inserts the plan's jobs into queue, then times clients working them
// all under the plan's flow.
func (c *BenchLimitsCommand) phase(ctx context.Context, r *ScenarioRun, store *Store, queue string, p limitsPlan,
	clients, workers, prefetch int, hold time.Duration, chunk int) (limitsPhase, error) {
	timed, timer := timeClaims(store.Backend, time.Now())
	be, counter := CountCompletions(timed, int64(p.jobs))
	probe := &limitsProbe{keyCur: map[string]int{}}
	handled := &atomic.Int64{}
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[benchFlow]) error {
		probe.enter(j.Args.Key)
		defer probe.leave(j.Args.Key)
		if hold > 0 {
			time.Sleep(hold)
		}
		handled.Add(1)
		return nil
	})); err != nil {
		return limitsPhase{}, err
	}
	cfg := func() *spool.Config {
		return &spool.Config{
			Workers: ws, Logger: r.Logger(),
			Queues: map[string]spool.QueueConfig{queue: {MaxWorkers: workers, Prefetch: queuePrefetch(prefetch), Flow: p.flow}},
		}
	}
	var cs []*spool.Client
	for range clients {
		cl, err := spool.NewClient(be, cfg())
		if err != nil {
			return limitsPhase{}, fmt.Errorf("%s: %w", r.Name, err)
		}
		cs = append(cs, cl)
	}
	if err := insertFlowJobs(ctx, cs[0], queue, p.jobs, p.keys, chunk); err != nil {
		return limitsPhase{}, WithCause(ctx, err)
	}
	start := time.Now()
	for _, cl := range cs {
		if err := cl.Start(ctx); err != nil {
			return limitsPhase{}, fmt.Errorf("%s: %w", r.Name, err)
		}
	}
	bar := r.Progress(p.name, "jobs", int64(p.jobs), counter.Written)
	err := WaitDrainedQueue(ctx, cs[0], queue, counter, handled)
	bar.Stop()
	elapsed := counter.DoneAt.Sub(start)
	for _, cl := range cs {
		stopClient(r.Stderr, r.Name, cl)
	}
	if err != nil {
		return limitsPhase{}, WithCause(ctx, err)
	}
	ph := limitsPhase{Name: p.name, Limit: p.limit, Bound: p.bound, Binds: p.binds, Jobs: p.jobs,
		Seconds: elapsed.Seconds(), JobsPerS: cli.Rate(int64(p.jobs), elapsed),
		MaxConcurrentObserved: int(probe.peak.Load())}
	if p.keys > 0 {
		ph.MaxPerKeyObserved = probe.keyPeak
	}
	var (
		claims  []time.Duration
		claimed int
	)
	for _, s := range timer.Samples() {
		if !s.err {
			claims, claimed = append(claims, s.d), claimed+s.jobs
		}
	}
	ph.Claim = Summarize(claims)
	if len(claims) > 0 {
		ph.JobsPerClaim = float64(claimed) / float64(len(claims))
	}
	switch {
	case p.rate != nil:
		starts, err := startTimes(ctx, store.Backend, queue)
		if err != nil {
			return limitsPhase{}, WithCause(ctx, err)
		}
		ph.MaxStartsPerWindow = maxInWindow(starts, p.rate.Per)
		ph.Exceeded = ph.MaxStartsPerWindow > p.bound
	case p.flow != nil && p.flow.KeyLimit > 0:
		ph.Exceeded = ph.MaxPerKeyObserved > p.bound
	case p.flow != nil:
		ph.Exceeded = ph.MaxConcurrentObserved > p.bound
	}
	return ph, nil
}

// insertFlowJobs inserts n flow jobs into queue, spread round-robin over
// keys flow keys (none when keys is 0).
func insertFlowJobs(ctx context.Context, client *spool.Client, queue string, n, keys, chunk int) error {
	opts := &spool.InsertOpts{Queue: queue}
	for done := 0; done < n; {
		k := min(chunk, n-done)
		params := make([]spool.InsertManyParams, k)
		for i := range params {
			a := benchFlow{}
			if keys > 0 {
				a.Key = fmt.Sprintf("key-%d", (done+i)%keys)
			}
			params[i] = spool.InsertManyParams{Args: a, InsertOpts: opts}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("bench: insert jobs: %w", err)
		}
		done += k
	}
	return nil
}

// WaitDrainedQueue waits until the counter has seen every completion
// written. If nothing moves for StallTimeout and no job of queue is left
// pending or running (some failed instead of completing), it gives up with
// the queue's counts.
func WaitDrainedQueue(ctx context.Context, client *spool.Client, queue string, counter *CompletionCounter, handled *atomic.Int64) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastWritten, lastHandled, lastChange := int64(-1), int64(-1), time.Now()
	for {
		select {
		case <-counter.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("bench: interrupted at %d of %d completions: %w", counter.Written(), counter.target, ctx.Err())
		case now := <-tick.C:
			w, h := counter.Written(), handled.Load()
			if w != lastWritten || h != lastHandled {
				lastWritten, lastHandled, lastChange = w, h, now
				continue
			}
			if now.Sub(lastChange) < StallTimeout {
				continue
			}
			lastChange = now
			stats, err := QueueStats(ctx, client, queue)
			if err != nil {
				continue // a transient error; the wait goes on
			}
			if PendingCount(stats) == 0 {
				return fmt.Errorf("bench: stalled at %d of %d completions with nothing left to run: %s", w, counter.target, FormatCounts(stats))
			}
		}
	}
}

// startTimes reads the start (attempted_at, the store's clock) of every
// job of queue.
func startTimes(ctx context.Context, be backend.Backend, queue string) ([]time.Time, error) {
	var (
		out   []time.Time
		after int64
	)
	for {
		rows, err := be.JobList(ctx, &backend.JobListParams{Queue: queue, AfterID: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("bench: read start times: %w", err)
		}
		for _, j := range rows {
			if j.AttemptedAt != nil {
				out = append(out, *j.AttemptedAt)
			}
		}
		if len(rows) < 1000 {
			break
		}
		after = rows[len(rows)-1].ID
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out, nil
}

// maxInWindow returns the most of the sorted times in any half-open window
// [t, t+per).
func maxInWindow(ts []time.Time, per time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < per {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// printLimitsResult prints the phases as a table.
func printLimitsResult(w io.Writer, r *limitsResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tlimit\tjobs/s\t× none\tmax at once\tmax per key\tmax starts/window\texceeded\tclaim p50 ms\tjobs/claim")
	for _, p := range r.Phases {
		perKey, window := "-", "-"
		if p.MaxPerKeyObserved > 0 {
			perKey = fmt.Sprint(p.MaxPerKeyObserved)
		}
		if p.MaxStartsPerWindow > 0 {
			window = fmt.Sprint(p.MaxStartsPerWindow)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%d\t%s\t%s\t%v\t%s\t%.1f\n", p.Name, p.Limit, cli.HumanInt(p.JobsPerS), p.JobsPerSRatio,
			p.MaxConcurrentObserved, perKey, window, p.Exceeded, fmtMS(p.Claim.P50), p.JobsPerClaim)
	}
	fmt.Fprintf(tw, "clients\t%d × %d workers, prefetch %d, jobs hold %s\n", r.Clients, r.Workers, r.Prefetch, r.JobDuration)
	fmt.Fprintf(tw, "backend\t%s\nstore\t%s\n", r.Backend, r.Store)
	return tw.Flush()
}

// limitsFigure draws each phase's rate.
func limitsFigure(r *limitsResult) *plot.Figure {
	rate := &plot.Chart{Title: "drain rate", YLabel: "jobs/s"}
	for _, p := range r.Phases {
		rate.Bars = append(rate.Bars, plot.Bar{Label: p.Name, Value: p.JobsPerS, Note: cli.HumanInt(p.JobsPerS)})
	}
	return &plot.Figure{Title: fmt.Sprintf("drains under flow limits (%s, %d clients)", r.Backend, r.Clients), Charts: []*plot.Chart{rate}}
}

// Usage implements cli.Command.
func (c *BenchLimitsCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench limits [flags]

Measures flow control (docs/flow.md). Each phase inserts jobs into a queue
of its own and times --clients clients working them all, each handler
holding its slot for --job-duration:

	none                  no flow control, the baseline
	global, not binding   a global limit of 4 × --clients × (--workers +
	                      --prefetch): prefetch takes only a limit's lower
	                      half, and jobs whose outcome is being written
	                      keep their slots, so at twice what the clients
	                      hold the limit already binds their prefetch
	per key, not binding  that limit per key, jobs over --keys keys
	global                a global limit of --global-limit
	per key               --key-limit per key, jobs over --keys keys
	rate                  --rate starts per --rate-per (jobs without keys)

The first three run --rounds times, side by side in a rotating order, each
round's ratio taken to that round's baseline; the median is printed (the
machine and the table change during a run). The binding phases run once,
after. Prints each phase's rate and ratio, the most
jobs the handlers saw running at once (in all and per key), and for the
rate phase the most starts, by the store's clock, in any window of
--rate-per. A phase whose limit was exceeded is reported on stderr.

Flags:

	--jobs N
		jobs in each concurrency phase (default 50000)
	--clients N
		clients sharing the queue (default 2)
	--workers N
		MaxWorkers of each client (default 50)
	--prefetch N
		Prefetch of each client; 0 disables prefetch (default 50)
	--job-duration DURATION
		how long each handler holds its slot (default 1ms)
	--global-limit N
		the binding global limit (default 20)
	--keys N
		flow keys of the per-key phases (default 10)
	--key-limit N
		the binding per-key limit (default 2)
	--rate N
		the binding rate limit (default 2000)
	--rate-per DURATION
		the rate limit's window (default 1s)
	--rate-jobs N
		jobs in the rate phase (default: 3 × --rate)
	--insert-chunk N
		jobs per insert call (default 10000)
	--rounds N
		rounds of the first three phases (default 3)
`+CommonUsage, "\n")
}
