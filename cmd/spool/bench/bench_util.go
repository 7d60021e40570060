package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

// Helpers shared by the bench scenarios: latency statistics, windows over
// time, counters sampled over time, a claim timer, per-backend probes and
// the --plot flag.

// LatencyStats summarises latencies, in milliseconds.
type LatencyStats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

// MS converts a duration to fractional milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the nearest-rank q-quantile (0 < q <= 1) of sorted
// durations: the smallest value with at least q of the values at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted))-1e-9)) - 1 // the epsilon absorbs q's rounding
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Summarize returns the statistics of ds, which it sorts in place.
func Summarize(ds []time.Duration) LatencyStats {
	if len(ds) == 0 {
		return LatencyStats{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return LatencyStats{
		Count: len(ds),
		Mean:  MS(sum / time.Duration(len(ds))),
		P50:   MS(percentile(ds, 0.50)),
		P95:   MS(percentile(ds, 0.95)),
		P99:   MS(percentile(ds, 0.99)),
		P999:  MS(percentile(ds, 0.999)),
		Max:   MS(ds[len(ds)-1]),
	}
}

// TimedLatency is a latency observed at an offset from the start of a run.
type TimedLatency struct {
	at time.Duration
	d  time.Duration
}

// Durations returns the latencies of samples, in order.
func Durations(samples []TimedLatency) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.d
	}
	return out
}

// latencyWindow summarises the latencies observed in one window of a run.
type latencyWindow struct {
	// At is the start of the window, in seconds from the start of the run.
	At    float64 `json:"t_s"`
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// latencyWindows groups samples into consecutive windows of the given width
// and summarises each; windows without samples are left out.
func latencyWindows(samples []TimedLatency, width time.Duration) []latencyWindow {
	if len(samples) == 0 || width <= 0 {
		return nil
	}
	byWindow := map[int64][]time.Duration{}
	for _, s := range samples {
		k := int64(s.at / width)
		byWindow[k] = append(byWindow[k], s.d)
	}
	keys := make([]int64, 0, len(byWindow))
	for k := range byWindow {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]latencyWindow, 0, len(keys))
	for _, k := range keys {
		ds := byWindow[k]
		slices.Sort(ds)
		out = append(out, latencyWindow{
			At:    (time.Duration(k) * width).Seconds(),
			Count: len(ds),
			P50:   MS(percentile(ds, 0.50)),
			P99:   MS(percentile(ds, 0.99)),
			Max:   MS(ds[len(ds)-1]),
		})
	}
	return out
}

// cdfPoints returns at most n+1 points (latency in ms, fraction of values
// at or below it) of the distribution of sorted durations, for a plot.
// Latencies are floored at 10 µs so that they fit a logarithmic axis.
func cdfPoints(sorted []time.Duration, n int) []plot.Point {
	if len(sorted) == 0 {
		return nil
	}
	out := make([]plot.Point, 0, n+1)
	for i := 0; i <= n; i++ {
		q := float64(i) / float64(n)
		var d time.Duration
		if i == 0 {
			d = sorted[0]
		} else {
			d = percentile(sorted, q)
		}
		out = append(out, plot.Point{X: max(MS(d), 0.01), Y: q})
	}
	return out
}

// windowSeries turns windows into plot lines of p50, p99 and max.
func windowSeries(ws []latencyWindow) (p50, p99, worst []plot.Point) {
	for _, w := range ws {
		p50 = append(p50, plot.Point{X: w.At, Y: w.P50})
		p99 = append(p99, plot.Point{X: w.At, Y: w.P99})
		worst = append(worst, plot.Point{X: w.At, Y: w.Max})
	}
	return p50, p99, worst
}

// countSample is a counter's value at an offset from the start of a run.
type countSample struct {
	at time.Duration
	n  int64
}

// counterSampler reads a counter at a fixed interval until stopped.
type counterSampler struct {
	start   time.Time
	read    func() int64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	samples []countSample // owned by the sampling goroutine until done
}

// startCounterSampler samples read every interval from now on.
func startCounterSampler(read func() int64, every time.Duration) *counterSampler {
	s := &counterSampler{start: time.Now(), read: read, stop: make(chan struct{}), done: make(chan struct{})}
	s.samples = append(s.samples, countSample{n: read()})
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				s.samples = append(s.samples, countSample{at: now.Sub(s.start), n: s.read()})
			}
		}
	}()
	return s
}

// Stop ends sampling, takes a last sample and returns them all. It may be
// called more than once.
func (s *counterSampler) Stop() []countSample {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.samples = append(s.samples, countSample{at: time.Since(s.start), n: s.read()})
	})
	return s.samples
}

// ratePoints turns counter samples into rates (per second) over windows of
// at least width, as plot points at the end of each window, in seconds.
func ratePoints(samples []countSample, width time.Duration) []plot.Point {
	var out []plot.Point
	if len(samples) == 0 {
		return out
	}
	base := samples[0]
	for _, s := range samples[1:] {
		if s.at-base.at < width {
			continue
		}
		out = append(out, plot.Point{X: s.at.Seconds(), Y: cli.Rate(s.n-base.n, s.at-base.at)})
		base = s
	}
	return out
}

// claimSample is one timed JobClaim call.
type claimSample struct {
	at   time.Duration // when the call started, from the timer's start
	d    time.Duration
	jobs int
	err  bool
}

// claimTimer wraps a backend and times every JobClaim call, as the
// completion counter counts JobFinishMany.
type claimTimer struct {
	backend.Backend
	Capabilities
	start   time.Time
	mu      sync.Mutex
	samples []claimSample
}

// timeClaims wraps be; the result keeps be's push wake-ups.
func timeClaims(be backend.Backend, start time.Time) (backend.Backend, *claimTimer) {
	t := &claimTimer{Backend: be, Capabilities: Capabilities{be}, start: start}
	return KeepNotifier(t, be), t
}

// JobClaim implements backend.Backend, recording the call's duration.
func (t *claimTimer) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	begin := time.Now()
	rows, err := t.Backend.JobClaim(ctx, p)
	d := time.Since(begin)
	t.mu.Lock()
	t.samples = append(t.samples, claimSample{at: begin.Sub(t.start), d: d, jobs: len(rows), err: err != nil})
	t.mu.Unlock()
	return rows, err
}

// JobClaimFlow implements backend.Backend, recording the flow claim's
// duration and the jobs its takes claimed.
func (t *claimTimer) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	begin := time.Now()
	var jobs int
	err := t.Backend.JobClaimFlow(ctx, p, func(tx backend.FlowTx) error {
		jobs = 0
		return claim(countingFlowTx{FlowTx: tx, jobs: &jobs})
	})
	d := time.Since(begin)
	t.mu.Lock()
	t.samples = append(t.samples, claimSample{at: begin.Sub(t.start), d: d, jobs: jobs, err: err != nil})
	t.mu.Unlock()
	return err
}

// countingFlowTx counts the jobs a flow claim's takes claimed.
type countingFlowTx struct {
	backend.FlowTx
	jobs *int
}

// FlowRunning implements backend.FlowTx, counting the jobs of a claim the
// store decided itself (FlowQuick).
func (c countingFlowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	run, err := c.FlowTx.FlowRunning(ctx)
	if err == nil && run.Quick != nil {
		*c.jobs += len(run.Quick.Jobs)
	}
	return run, err
}

// FlowTake implements backend.FlowTx.
func (c countingFlowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	rows, err := c.FlowTx.FlowTake(ctx, takes, final)
	*c.jobs += len(rows)
	return rows, err
}

// Samples returns a copy of the claims timed so far.
func (t *claimTimer) Samples() []claimSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.samples)
}

// notifyingBackend is a wrapped backend that keeps the wrapped one's push
// wake-ups.
type notifyingBackend struct {
	backend.Backend
	backend.Notifier
	Capabilities
}

// routingBackend is a wrapped backend that keeps the wrapped one's push
// wake-ups and their routing.
type routingBackend struct {
	backend.Backend
	backend.Notifier
	backend.WakeRouter
	Capabilities
}

// AddWakeDemand implements backend.WakeDemand as the wrapped notifier does.
func (b notifyingBackend) AddWakeDemand(waiting func() bool) (remove func()) {
	return backend.AddWakeDemandTo(b.Notifier, waiting)
}

// AddWakeDemand implements backend.WakeDemand as the wrapped notifier does.
func (b routingBackend) AddWakeDemand(waiting func() bool) (remove func()) {
	return backend.AddWakeDemandTo(b.Notifier, waiting)
}

// AddWakeQueues implements backend.WakeQueues as the wrapped notifier does.
func (b notifyingBackend) AddWakeQueues(queues []string) (remove func()) {
	return backend.AddWakeQueuesTo(b.Notifier, queues)
}

// AddWakeQueues implements backend.WakeQueues as the wrapped notifier does.
func (b routingBackend) AddWakeQueues(queues []string) (remove func()) {
	return backend.AddWakeQueuesTo(b.Notifier, queues)
}

// Capabilities, embedded in a wrapper of a backend, answers the optional
// capabilities the engine asks a store about with a yes or no
// (backend.StallCrediter, backend.OutcomeStepWriter, backend.SettleWriters) as the wrapped
// backend Of does: a wrapper that passes the calls on unchanged must not
// make the engine over it run another way than over the store itself.
type Capabilities struct{ Of backend.Backend }

// CreditsStalls implements backend.StallCrediter.
func (c Capabilities) CreditsStalls() bool {
	s, ok := c.Of.(backend.StallCrediter)
	return ok && s.CreditsStalls()
}

// WritesOutcomeSteps implements backend.OutcomeStepWriter.
func (c Capabilities) WritesOutcomeSteps() bool {
	w, ok := c.Of.(backend.OutcomeStepWriter)
	return ok && w.WritesOutcomeSteps()
}

// SettleWriters implements backend.SettleWriters.
func (c Capabilities) SettleWriters() int {
	w, ok := c.Of.(backend.SettleWriters)
	if !ok {
		return 0
	}
	return w.SettleWriters()
}

// KeepNotifier returns wrapper, made a backend.Notifier when inner is one
// (and a backend.WakeRouter when inner is one too).
func KeepNotifier(wrapper, inner backend.Backend) backend.Backend {
	n, ok := inner.(backend.Notifier)
	if !ok {
		return wrapper
	}
	if r, ok := inner.(backend.WakeRouter); ok {
		return routingBackend{Backend: wrapper, Notifier: n, WakeRouter: r, Capabilities: Capabilities{wrapper}}
	}
	return notifyingBackend{Backend: wrapper, Notifier: n, Capabilities: Capabilities{wrapper}}
}

// tableSample is what a backend reports of its jobs table at one moment.
type tableSample struct {
	// At is seconds from the start of the run.
	At float64 `json:"t_s"`
	// DeadTuples are row versions no longer visible to anyone but not yet
	// removed (PostgreSQL: pg_stat_user_tables.n_dead_tup).
	DeadTuples int64 `json:"dead_tuples"`
	LiveTuples int64 `json:"live_tuples"`
	// HorizonAge is the age, in transactions, of the oldest snapshot any
	// session of the server holds: what keeps dead rows from removal. -1
	// when the backend cannot say.
	HorizonAge int64 `json:"horizon_age_xacts"`
	TableBytes int64 `json:"table_bytes"`
	// PendingIndexBytes is the size of the index claims scan.
	PendingIndexBytes int64 `json:"pending_index_bytes"`
}

// benchProbe holds the backend-specific parts of the scenarios. Every field
// is optional; a scenario that needs a missing one says so.
type benchProbe struct {
	// deadMeasure says what tableSample.DeadTuples counts on this backend.
	deadMeasure string
	// sampleTable reads dead and live rows and sizes of the jobs table.
	sampleTable func(ctx context.Context, be backend.Backend) (tableSample, error)
	// holdSnapshot opens a second session that holds a snapshot, keeping
	// cleanup from removing rows that die after it, until release is
	// called. about describes what it holds.
	holdSnapshot func(ctx context.Context, be backend.Backend) (release func() error, about string, err error)
	// settle brings the jobs table's planner statistics and visibility
	// information up to date (PostgreSQL: VACUUM ANALYZE).
	settle func(ctx context.Context, be backend.Backend) error
}

// benchProbes maps backend names (backend.Backend.Name) to their probes;
// bench_<backend>.go files fill it in init functions.
var benchProbes = map[string]*benchProbe{}

// probeFor returns the probe of be's backend, never nil.
func probeFor(be backend.Backend) *benchProbe {
	if p, ok := benchProbes[be.Name()]; ok {
		return p
	}
	return &benchProbe{}
}

// ErrNotSupported marks a measurement a backend cannot make.
var ErrNotSupported = errors.New("not supported on this backend")

// addPlotFlag registers --plot on fs.
func addPlotFlag(fs *flag.FlagSet) *string {
	return fs.String("plot", "", "draw the results into `FILE` (.png or .svg)")
}

// PlotUsage documents --plot, for scenario usages.
const PlotUsage = `	--plot FILE
		draw the results into FILE, a .png or .svg image
`

// checkPlotPath validates --plot before a run, so that a bad path fails at
// once and writes nothing.
func checkPlotPath(cmd, path string) error {
	if path == "" {
		return nil
	}
	if _, err := plot.FormatOf(path); err != nil {
		return cli.Usagef(cmd, "--plot %q: want a file name ending in .png or .svg", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return cli.Usagef(cmd, "--plot %q: directory %s does not exist", path, filepath.Dir(path))
	}
	return nil
}

// savePlot writes fig to path, if a path was given.
func savePlot(path string, fig *plot.Figure) error {
	if path == "" {
		return nil
	}
	if err := fig.Save(path); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// reorderBin is one bin of a reorder histogram: how many jobs started
// between Lo and Hi (inclusive) positions away from their insert order.
type reorderBin struct {
	Lo    int64 `json:"lo"`
	Hi    int64 `json:"hi"`
	Count int64 `json:"count"`
}

// log2Bins bins non-negative distances as 0, 1, 2–3, 4–7, 8–15, … up to
// the largest, leaving no gap between the first and last non-empty bin.
func log2Bins(distances []int64) []reorderBin {
	var bins []reorderBin
	for _, d := range distances {
		d = max(d, 0)
		i := 0
		if d > 0 {
			i = 1
			for v := d; v > 1; v >>= 1 {
				i++
			}
		}
		for len(bins) <= i {
			k := len(bins)
			lo, hi := int64(0), int64(0)
			if k > 0 {
				lo, hi = int64(1)<<(k-1), int64(1)<<k-1
			}
			bins = append(bins, reorderBin{Lo: lo, Hi: hi})
		}
		bins[i].Count++
	}
	return bins
}

// writeReorderPlot draws a reorder histogram (|start position − job index|)
// as bars on a logarithmic count axis, for the ordering scenario. title
// names the run ("ordering: postgres, pessimistic, 10 workers").
func writeReorderPlot(path, title string, bins []reorderBin) error {
	bars := make([]plot.Bar, len(bins))
	for i, b := range bins {
		label := strconv.FormatInt(b.Lo, 10)
		if b.Hi > b.Lo {
			label += "–" + strconv.FormatInt(b.Hi, 10)
		}
		bars[i] = plot.Bar{Label: label, Value: float64(b.Count), Note: cli.HumanInt(float64(b.Count))}
	}
	return savePlot(path, &plot.Figure{Title: title, Charts: []*plot.Chart{{
		Title:  "Reorder histogram",
		XLabel: "|start position − insert index|",
		YLabel: "jobs",
		YScale: plot.Log,
		Bars:   bars,
	}}})
}

// ParseCountList parses a comma-separated list of positive counts, each an
// integer or a number like 1e6.
func ParseCountList(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v < 1 || v > 1e12 || v != math.Trunc(v) {
			return nil, fmt.Errorf("%q is not a whole number from 1 to 1e12", f)
		}
		out = append(out, int64(v))
	}
	return out, nil
}

// Median returns the median of vs (the mean of the middle two for an even
// count), 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// FormatRuns formats per-round figures for a table ("70.4k 69.5k").
func FormatRuns(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = plot.FormatValue(v)
	}
	return strings.Join(parts, " ")
}

// drainFigure draws bench drain's rate over time, from its completion
// counter sampled every 100 ms.
func drainFigure(r *drainResult, samples []countSample) *plot.Figure {
	return &plot.Figure{
		Title: fmt.Sprintf("drain: %s no-op jobs, %s jobs/s overall (%s)", cli.HumanInt(float64(r.Jobs)), cli.HumanInt(r.JobsPerS), r.Backend),
		Charts: []*plot.Chart{{
			Title:  "Completions written per second (200 ms windows)",
			XLabel: "time since start (s)", YLabel: "jobs/s", XFromZero: true,
			Lines: []plot.Line{{Name: "drain", Points: ratePoints(samples, 200*time.Millisecond)}},
		}},
	}
}

// writeResult prints res as JSON (asJSON) or as table prints it, and then
// draws the figure into plotPath, if one was given: a plot that cannot be
// written is reported after the results, never instead of them.
func writeResult(m *cli.Env, cmd string, asJSON bool, res any, table func(io.Writer) error, plotPath string, figure func() *plot.Figure) error {
	var err error
	if asJSON {
		err = cli.WriteJSON(m.Stdout, res)
	} else {
		err = table(m.Stdout)
	}
	if err != nil {
		return err
	}
	if err := savePlot(plotPath, figure()); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// SetURLParam returns dsn with the query parameter name set to value.
func SetURLParam(dsn, name, value string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse database URL: %w", err)
	}
	q := u.Query()
	q.Set(name, value)
	// A space as %20, which PostgreSQL's URL form needs and every other
	// store's parser reads as a space too.
	u.RawQuery = postgres.EncodeQuery(q)
	return u.String(), nil
}
