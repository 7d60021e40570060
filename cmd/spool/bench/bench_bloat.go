package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("bloat", "steady load while another session holds a snapshot; claim latency and dead tuples over time",
		func(m *cli.Env) cli.Command { return &BenchBloatCommand{m: m} })
}

// BenchBloatCommand runs the steady load in two phases of its own: first
// unblocked, then while a second session holds a snapshot open, so that
// dead rows cannot be cleaned up. It times every claim and samples the
// jobs table's dead tuples throughout.
type BenchBloatCommand struct{ m *cli.Env }

// bloatPhase summarises one phase of the run.
type bloatPhase struct {
	Name        string       `json:"name"`
	FromS       float64      `json:"from_s"`
	ToS         float64      `json:"to_s"`
	Claims      int          `json:"claims"`
	EmptyClaims int          `json:"empty_claims"`
	ClaimErrors int          `json:"claim_errors"`
	JobsClaimed int64        `json:"jobs_claimed"`
	Claim       LatencyStats `json:"claim_latency"`
	Pickup      LatencyStats `json:"pickup_latency"` // of the jobs inserted in the phase
	Inserts     int          `json:"inserts"`
	InsertRate  float64      `json:"insert_rate"`
	InsertCall  LatencyStats `json:"insert_call_latency"`
	// DeadTuplesMax and DeadTuplesEnd are the most dead tuples sampled in
	// the phase and the last sample; absent when the backend cannot say.
	DeadTuplesMax *int64 `json:"dead_tuples_max,omitempty"`
	DeadTuplesEnd *int64 `json:"dead_tuples_end,omitempty"`
	// HorizonAgeMax is the oldest the server's cleanup horizon got, in
	// transactions.
	HorizonAgeMax *int64 `json:"horizon_age_max_xacts,omitempty"`
}

// bloatResult is the outcome of bench bloat, as printed with --json.
type bloatResult struct {
	Scenario     string          `json:"scenario"`
	Backend      string          `json:"backend"`
	Store        string          `json:"store"`
	Kept         bool            `json:"kept"`
	Hold         string          `json:"hold"`
	DeadMeasure  string          `json:"dead_measure"` // what dead_tuples counts on this backend
	TargetRate   float64         `json:"target_rate"`
	AchievedRate float64         `json:"achieved_rate"`
	BaselineS    float64         `json:"baseline_s"`
	HoldS        float64         `json:"hold_s"`
	Scheduled    int64           `json:"scheduled"` // jobs the schedule called for
	Jobs         int64           `json:"jobs"`      // jobs inserted
	Started      int64           `json:"started"`
	Duplicates   int64           `json:"duplicates"`
	Phases       []bloatPhase    `json:"phases"`
	ClaimP99x    float64         `json:"claim_p99_ratio"`  // held p99 / baseline p99
	PickupP99x   float64         `json:"pickup_p99_ratio"` // held p99 / baseline p99
	ClaimOverT   []latencyWindow `json:"claim_latency_over_time"`
	PickupOverT  []latencyWindow `json:"pickup_latency_over_time"`
	Table        []tableSample   `json:"table_samples"`
	Workers      int             `json:"workers"`
	Prefetch     int             `json:"prefetch"`
	Producers    int             `json:"producers"`
	Deleted      bool            `json:"delete_completed"`
	GOMAXPROCS   int             `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchBloatCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench bloat")
	cfg := addSteadyWorkerFlags(r.Flags)
	hold := r.Flags.Duration("hold", 5*time.Minute, "how long the second session holds its snapshot")
	baseline := r.Flags.Duration("baseline", 0, "length of the unblocked phase before it (default: --hold)")
	every := r.Flags.Duration("sample", time.Second, "how often to sample the jobs table")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if *baseline == 0 {
		*baseline = *hold
	}
	if err := r.Check(append([]Check{
		Want(*hold > 0, "--hold must be positive"),
		Want(*baseline >= 0, "--baseline must not be negative"),
		Want(*every >= 10*time.Millisecond, "--sample must be at least 10ms"),
	}, cfg.checks()...)...); err != nil {
		return err
	}
	baseJobs, total := cfg.jobsFor(*baseline), cfg.jobsFor(*baseline+*hold)
	if total > 50_000_000 {
		return cli.Usagef(r.Name, "--rate × (--baseline + --hold) is %d jobs; at most 50,000,000", total)
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	probe := probeFor(store.Backend)
	if probe.holdSnapshot == nil {
		return fmt.Errorf("bench bloat: holding a snapshot open is %w (%s)", ErrNotSupported, store.Backend.Name())
	}
	stderr := r.Stderr
	producer, closeProducer, err := openSteadyProducer(ctx, store, "")
	if err != nil {
		return fmt.Errorf("bench bloat: %w", err)
	}
	r.AtEnd(closeProducer)

	base := time.Now()
	rec := NewPickupRecorder(base, total)
	timed, timer := timeClaims(store.Backend, base)
	consumer, err := cfg.newConsumer(timed, rec, stderr)
	if err != nil {
		return fmt.Errorf("bench bloat: %w", err)
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	if err := consumer.Start(ctx); err != nil {
		return fmt.Errorf("bench bloat: %w", err)
	}
	r.stopAtEnd(consumer)

	sampler := startTableSampler(ctx, store, probe, base, *every)
	defer sampler.stop()

	load := &SteadyLoad{Client: producer, Rate: *cfg.rate, Producers: *cfg.producers, Rec: rec}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	start := time.Now()
	holdFrom, holdUntil := start.Add(*baseline), start.Add(*baseline+*hold)
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Run(runCtx, start, total, holdUntil) }()

	bar := r.Progress("baseline", "jobs", baseJobs,
		func() int64 { return min(load.Inserted.Load(), baseJobs) })
	select {
	case <-time.After(time.Until(holdFrom)):
	case err := <-loadDone:
		bar.Stop()
		if err == nil {
			err = errors.New("the load ended before the baseline did")
		}
		return WithCause(ctx, fmt.Errorf("bench bloat: %w", err))
	}
	bar.Stop()
	release, about, err := probe.holdSnapshot(runCtx, store.Backend)
	if err != nil {
		cancelRun(err)
		<-loadDone
		return WithCause(ctx, fmt.Errorf("bench bloat: %w", err))
	}
	holdAt := time.Since(base)
	released := false
	releaseOnce := func() error {
		if released {
			return nil
		}
		released = true
		return release()
	}
	defer func() { _ = releaseOnce() }()
	bar = r.Progress("held", "jobs", total-baseJobs,
		func() int64 { return max(0, load.Inserted.Load()-baseJobs) })
	err = <-loadDone // at holdUntil
	insertTime := time.Since(start)
	sampler.sampleNow()
	releaseErr := releaseOnce()
	releaseAt := time.Since(base)
	bar.Stop()
	if err == nil {
		err = releaseErr
	}
	if err != nil {
		return WithCause(ctx, fmt.Errorf("bench bloat: %w", err))
	}
	// Jobs inserted but not yet started are picked up with the snapshot
	// released: the third phase shows how the queue catches up.
	inserted := load.Inserted.Load()
	bar = cli.StartProgress(r.Common.ProgressWriter(r.Stderr), c.m.StderrTerminal, "pickup", "jobs", inserted, rec.started.Load)
	err = WaitStarted(ctx, rec, inserted)
	bar.Stop()
	if err != nil {
		return WithCause(ctx, fmt.Errorf("bench bloat: %w", err))
	}
	sampler.sampleNow()
	endAt := time.Since(base)
	table, serr := sampler.stop()
	if serr != nil {
		fmt.Fprintf(stderr, "spool: bench bloat: sampling the jobs table: %v\n", serr)
	}

	res := bloatResult{
		Scenario:     "bloat",
		Backend:      store.Backend.Name(),
		Store:        store.Scratch.Name,
		Kept:         store.Keep,
		Hold:         about,
		DeadMeasure:  probe.deadMeasure,
		TargetRate:   *cfg.rate,
		AchievedRate: cli.Rate(load.Inserted.Load(), insertTime),
		BaselineS:    baseline.Seconds(),
		HoldS:        hold.Seconds(),
		Scheduled:    total,
		Jobs:         load.Inserted.Load(),
		Started:      rec.started.Load(),
		Duplicates:   rec.Duplicates.Load(),
		Table:        table,
		Workers:      *cfg.workers,
		Prefetch:     *cfg.prefetch,
		Producers:    *cfg.producers,
		Deleted:      *cfg.deleteCompleted,
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
	}
	claims := timer.Samples()
	pickups, _ := rec.Latencies(total)
	claimLat := make([]TimedLatency, len(claims))
	for i, s := range claims {
		claimLat[i] = TimedLatency{at: s.at, d: s.d}
	}
	res.ClaimOverT = latencyWindows(claimLat, time.Second)
	res.PickupOverT = latencyWindows(pickups, time.Second)
	res.Phases = []bloatPhase{
		summarizePhase("baseline", 0, holdAt, claims, pickups, load.callTimes, table),
		summarizePhase("held", holdAt, releaseAt, claims, pickups, load.callTimes, table),
		summarizePhase("after release", releaseAt, endAt+1, claims, pickups, load.callTimes, table),
	}
	if b := res.Phases[0].Claim.P99; b > 0 {
		res.ClaimP99x = res.Phases[1].Claim.P99 / b
	}
	if b := res.Phases[0].Pickup.P99; b > 0 {
		res.PickupP99x = res.Phases[1].Pickup.P99 / b
	}
	return r.Finish(res, func(w io.Writer) error { return printBloatResult(w, &res) },
		func() *plot.Figure { return bloatFigure(&res) })
}

// summarizePhase summarises the claims, pickups (by commit time) and table
// samples that fall in [from, to).
func summarizePhase(name string, from, to time.Duration, claims []claimSample, pickups, inserts []TimedLatency, table []tableSample) bloatPhase {
	p := bloatPhase{Name: name, FromS: from.Seconds(), ToS: to.Seconds()}
	var cl, pl, il []time.Duration
	for _, s := range inserts {
		if s.at >= from && s.at < to {
			il = append(il, s.d)
		}
	}
	p.Inserts = len(il)
	p.InsertRate = cli.Rate(int64(len(il)), to-from)
	for _, c := range claims {
		if c.at < from || c.at >= to {
			continue
		}
		p.Claims++
		switch {
		case c.err:
			p.ClaimErrors++
		case c.jobs == 0:
			p.EmptyClaims++
		}
		p.JobsClaimed += int64(c.jobs)
		cl = append(cl, c.d)
	}
	for _, s := range pickups {
		if s.at >= from && s.at < to {
			pl = append(pl, s.d)
		}
	}
	p.Claim, p.Pickup, p.InsertCall = Summarize(cl), Summarize(pl), Summarize(il)
	for _, s := range table {
		if s.At < from.Seconds() || s.At > to.Seconds() {
			continue
		}
		d, h := s.DeadTuples, s.HorizonAge
		if p.DeadTuplesMax == nil || d > *p.DeadTuplesMax {
			p.DeadTuplesMax = &d
		}
		if h >= 0 && (p.HorizonAgeMax == nil || h > *p.HorizonAgeMax) {
			p.HorizonAgeMax = &h
		}
		p.DeadTuplesEnd = &d
	}
	return p
}

// tableSampler samples the jobs table in the background.
type tableSampler struct {
	ctx     context.Context
	store   *Store
	probe   *benchProbe
	base    time.Time
	mu      sync.Mutex
	samples []tableSample
	err     error
	failed  atomic.Bool
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// startTableSampler samples every interval until stop; it does nothing for
// a backend whose probe cannot sample.
func startTableSampler(ctx context.Context, store *Store, probe *benchProbe, base time.Time, every time.Duration) *tableSampler {
	s := &tableSampler{ctx: ctx, store: store, probe: probe, base: base, quit: make(chan struct{}), done: make(chan struct{})}
	if probe.sampleTable == nil {
		close(s.done)
		return s
	}
	s.sampleNow()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				s.sampleNow()
			}
		}
	}()
	return s
}

// sampleNow takes one sample; the first error stops sampling.
func (s *tableSampler) sampleNow() {
	if s.probe.sampleTable == nil || s.failed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	at := time.Since(s.base)
	sample, err := s.probe.sampleTable(ctx, s.store.Backend)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.failed.CompareAndSwap(false, true) {
			s.err = err
		}
		return
	}
	sample.At = at.Seconds()
	s.samples = append(s.samples, sample)
}

// stop ends sampling and returns the samples, in time order, and the error
// that stopped sampling early, if any.
func (s *tableSampler) stop() ([]tableSample, error) {
	s.once.Do(func() { close(s.quit) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	// A sample taken from the run's goroutine may land beside one of the
	// sampler's own, in either order.
	slices.SortStableFunc(s.samples, func(a, b tableSample) int { return cmp.Compare(a.At, b.At) })
	return s.samples, s.err
}

// bloatFigure draws claim latency, dead tuples and pickup latency over time,
// with the held phase shaded.
func bloatFigure(r *bloatResult) *plot.Figure {
	held := []plot.Span{{From: r.Phases[1].FromS, To: r.Phases[1].ToS, Label: "snapshot held"}}
	c50, c99, cmax := windowSeries(r.ClaimOverT)
	p50, p99, _ := windowSeries(r.PickupOverT)
	var dead, live []plot.Point
	for _, s := range r.Table {
		dead = append(dead, plot.Point{X: s.At, Y: float64(s.DeadTuples)})
		live = append(live, plot.Point{X: s.At, Y: float64(s.LiveTuples)})
	}
	charts := []*plot.Chart{
		{
			Title:  fmt.Sprintf("Claim latency (1 s windows): p99 %.2f ms unblocked, %.2f ms held (%.2f×)", r.Phases[0].Claim.P99, r.Phases[1].Claim.P99, r.ClaimP99x),
			XLabel: "time (s)", YLabel: "JobClaim call (ms)", YScale: plot.Log, Spans: held, XFromZero: true,
			Lines: []plot.Line{{Name: "p50", Points: c50}, {Name: "p99", Points: c99}, {Name: "max", Points: cmax, Width: 1}},
		},
	}
	if len(r.Table) > 0 {
		charts = append(charts, &plot.Chart{
			Title:  "dead: " + r.DeadMeasure,
			XLabel: "time (s)", YLabel: "tuples", Spans: held, XFromZero: true,
			Lines: []plot.Line{{Name: "dead", Points: dead, Color: plot.Palette[1]}, {Name: "live", Points: live, Color: plot.Palette[2]}},
		})
	}
	charts = append(charts, &plot.Chart{
		Title:  "Pickup latency (1 s windows)",
		XLabel: "time (s)", YLabel: "pickup latency (ms)", YScale: plot.Log, Spans: held, XFromZero: true,
		Lines: []plot.Line{{Name: "p50", Points: p50}, {Name: "p99", Points: p99}},
	})
	return &plot.Figure{
		Title:  fmt.Sprintf("bloat: %s jobs/s, snapshot held for %gs after %gs unblocked (%s)", cli.HumanInt(r.TargetRate), r.HoldS, r.BaselineS, r.Backend),
		Charts: charts,
	}
}

// printBloatResult prints one column per phase.
func printBloatResult(w io.Writer, r *bloatResult) error {
	fmt.Fprintf(w, "bloat: %s jobs/s target, %s achieved; %s\n", cli.HumanInt(r.TargetRate), cli.HumanInt(r.AchievedRate), r.Hold)
	fmt.Fprintf(w, "dead tuples: %s\n\n", r.DeadMeasure)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	optional := func(p *int64) string {
		if p == nil {
			return "n/a"
		}
		return cli.HumanInt(float64(*p))
	}
	rows := []struct {
		name string
		cell func(p *bloatPhase) string
	}{
		{"seconds", func(p *bloatPhase) string { return fmt.Sprintf("%.1f–%.1f", p.FromS, p.ToS) }},
		{"inserts/s", func(p *bloatPhase) string { return cli.HumanInt(p.InsertRate) }},
		{"insert call p50 / p99", func(p *bloatPhase) string { return fmtMS(p.InsertCall.P50) + " / " + fmtMS(p.InsertCall.P99) }},
		{"claims (empty)", func(p *bloatPhase) string { return fmt.Sprintf("%d (%d)", p.Claims, p.EmptyClaims) }},
		{"jobs claimed", func(p *bloatPhase) string { return fmt.Sprint(p.JobsClaimed) }},
		{"claim p50", func(p *bloatPhase) string { return fmtMS(p.Claim.P50) }},
		{"claim p95", func(p *bloatPhase) string { return fmtMS(p.Claim.P95) }},
		{"claim p99", func(p *bloatPhase) string { return fmtMS(p.Claim.P99) }},
		{"claim p99.9", func(p *bloatPhase) string { return fmtMS(p.Claim.P999) }},
		{"claim max", func(p *bloatPhase) string { return fmtMS(p.Claim.Max) }},
		{"pickup p50", func(p *bloatPhase) string { return fmtMS(p.Pickup.P50) }},
		{"pickup p99", func(p *bloatPhase) string { return fmtMS(p.Pickup.P99) }},
		{"dead tuples max", func(p *bloatPhase) string { return optional(p.DeadTuplesMax) }},
		{"dead tuples at end", func(p *bloatPhase) string { return optional(p.DeadTuplesEnd) }},
		{"horizon age max (xacts)", func(p *bloatPhase) string { return optional(p.HorizonAgeMax) }},
	}
	head := []string{""}
	for _, p := range r.Phases {
		head = append(head, strings.ToUpper(p.Name))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, row := range rows {
		cells := []string{row.name}
		for i := range r.Phases {
			cells = append(cells, row.cell(&r.Phases[i]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nheld / unblocked p99: claim %.2f×, pickup %.2f×\n", r.ClaimP99x, r.PickupP99x)
	return err
}

// Usage implements cli.Command.
func (c *BenchBloatCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench bloat [flags]

Runs the steady load of bench steady (a second client inserting --rate jobs
per second, one client working them) in two phases of one run: --baseline
unblocked, then --hold while a second session holds a snapshot open
(PostgreSQL: a REPEATABLE READ transaction that has taken its snapshot, so
its xmin keeps VACUUM and page pruning from removing the rows that die
after it, as a forgotten transaction would; MySQL/MariaDB: a transaction
WITH CONSISTENT SNAPSHOT, which holds back purge; SQLite: a read
transaction on another connection, which keeps checkpoints from starting
the write-ahead log over). Every JobClaim call is timed; what the snapshot
keeps (PostgreSQL: the jobs table's dead tuples, pg_stat_user_tables;
MySQL: the history list length; SQLite: the WAL's pages) and the live rows
are sampled every --sample. The load stops when the hold ends, whether or not it kept
up with --rate, and the snapshot is released; a third phase covers the
jobs still waiting then. Prints insert rate, claim and pickup latency per
phase, the ratio of the held phase's p99 to the unblocked one's, and the
dead tuples seen.

A quick check: --hold 30s (a one-minute run).

Flags:

	--hold DURATION
		how long the second session holds its snapshot (default 5m0s)
	--baseline DURATION
		length of the unblocked phase before it (default: as --hold)
	--sample DURATION
		how often to sample the jobs table (default 1s)
`+steadyWorkerUsage+PlotUsage+CommonUsage, "\n")
}
