package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
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
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("steady", "insert at a fixed rate while workers run; pickup latency percentiles",
		func(m *cli.Env) cli.Command { return &BenchSteadyCommand{m: m} })
}

// BenchSteadyCommand inserts jobs at a fixed rate from a second client while
// one client works them, and measures pickup latency: from the moment the
// insert's commit returned to the moment the handler started.
type BenchSteadyCommand struct{ m *cli.Env }

// SteadyArgs is the args of the steady load's jobs: a sequence number.
type SteadyArgs struct {
	Seq int64 `json:"seq"`
}

// Kind implements spool.JobArgs.
func (SteadyArgs) Kind() string { return "spool_bench_steady" }

// PickupRecorder records, by sequence number, when each job's insert
// committed and when its handler first started, in nanoseconds from base
// plus one (0: not yet).
type PickupRecorder struct {
	Base       time.Time
	commit     []atomic.Int64
	start      []atomic.Int64
	began      []atomic.Int64 // the claim that took the job began (ClaimBeganAt)
	ids        []atomic.Int64 // the job's id (InsertedAs)
	returned   []atomic.Int64 // the claim that took the job returned (ClaimReturnedAt)
	started    atomic.Int64   // first starts
	Duplicates atomic.Int64   // later starts of a job already started
}

func NewPickupRecorder(base time.Time, n int64) *PickupRecorder {
	return &PickupRecorder{Base: base, commit: make([]atomic.Int64, n), start: make([]atomic.Int64, n), began: make([]atomic.Int64, n), ids: make([]atomic.Int64, n), returned: make([]atomic.Int64, n)}
}

// committed records that job seq's insert has committed.
func (r *PickupRecorder) committed(seq int64) {
	r.commit[seq].Store(int64(time.Since(r.Base)) + 1)
}

// InsertedAs records job seq's id.
func (r *PickupRecorder) InsertedAs(seq, id int64) {
	if seq >= 0 && seq < int64(len(r.ids)) {
		r.ids[seq].Store(id)
	}
}

// CommittedAt returns when job seq's insert committed, and false when it
// has not (yet).
func (r *PickupRecorder) CommittedAt(seq int64) (time.Time, bool) {
	if seq < 0 || seq >= int64(len(r.commit)) {
		return time.Time{}, false
	}
	c := r.commit[seq].Load()
	return r.Base.Add(time.Duration(c - 1)), c != 0
}

// StartedAt returns when job seq's handler first started, and false when
// it has not (yet).
func (r *PickupRecorder) StartedAt(seq int64) (time.Time, bool) {
	if seq < 0 || seq >= int64(len(r.start)) {
		return time.Time{}, false
	}
	s := r.start[seq].Load()
	return r.Base.Add(time.Duration(s - 1)), s != 0
}

// handlerStarted records that job seq's handler started.
func (r *PickupRecorder) handlerStarted(seq int64) { r.HandlerStartedAt(seq, time.Now()) }

// HandlerStartedAt records that job seq's handler started at t (in another
// process of this machine: the wall clocks agree).
func (r *PickupRecorder) HandlerStartedAt(seq int64, t time.Time) {
	if seq < 0 || seq >= int64(len(r.start)) {
		return
	}
	if r.start[seq].CompareAndSwap(0, int64(t.Sub(r.Base))+1) {
		r.started.Add(1)
	} else {
		r.Duplicates.Add(1)
	}
}

// ClaimBeganAt records when the claim that took job seq began, by the
// store's clock (the job's AttemptedAt: on this machine the clocks agree).
func (r *PickupRecorder) ClaimBeganAt(seq int64, t time.Time) {
	if seq < 0 || seq >= int64(len(r.began)) {
		return
	}
	r.began[seq].CompareAndSwap(0, int64(t.Sub(r.Base))+1)
}

// ClaimReturnedAt records when the claim call that took job seq returned,
// in the process that made it.
func (r *PickupRecorder) ClaimReturnedAt(seq int64, t time.Time) {
	if seq < 0 || seq >= int64(len(r.returned)) {
		return
	}
	r.returned[seq].CompareAndSwap(0, int64(t.Sub(r.Base))+1)
}

// PickupSplit divides pickup latency at the moment the claim that took
// each job began: before it, the wake-up and the claim's wait for its
// turn; after it, the claim's statement, its commit, its reply and the
// handler's dispatch. A claim that began before its job's insert call
// returned (one already out, or a poll) gives a negative first part.
// Where the store's claim return is recorded too (ClaimReturnedAt), the
// part after the claim began is divided again where the claim call
// returned: the claim's statements, commit and reply, then the client's
// dispatch to a handler.
type PickupSplit struct {
	Jobs int `json:"jobs"` // jobs with all three times
	// ClaimBeganFirst counts the jobs whose claim began before their insert
	// call returned.
	ClaimBeganFirst int           `json:"claim_began_first"`
	BeforeP50       time.Duration `json:"before_claim_p50_ns"`
	AfterP50        time.Duration `json:"after_claim_began_p50_ns"`
	// The slowest 2% of the jobs: the least pickup among them and the
	// means of their two parts.
	SlowFrom   time.Duration `json:"slowest_2pct_from_ns"`
	SlowBefore time.Duration `json:"slowest_2pct_before_claim_ns"`
	SlowAfter  time.Duration `json:"slowest_2pct_after_claim_began_ns"`
	// Returned counts the jobs with their claim's return too; the p50s
	// and the slowest 2%'s means of the claim call's part (began →
	// returned) and the dispatch's (returned → handler), over those.
	Returned     int           `json:"returned"`
	CallP50      time.Duration `json:"claim_call_p50_ns"`
	DispatchP50  time.Duration `json:"dispatch_p50_ns"`
	SlowCall     time.Duration `json:"slowest_2pct_claim_call_ns"`
	SlowDispatch time.Duration `json:"slowest_2pct_dispatch_ns"`
}

// Split returns the PickupSplit of the jobs below n (Jobs 0 when no job has
// the three times: the store records no claim time, say).
func (r *PickupRecorder) Split(n int64) PickupSplit {
	type part struct {
		total, before, after time.Duration
		// call and dispatch divide after; returned: they are known.
		call, dispatch time.Duration
		returned       bool
	}
	var all []part
	for i := range min(n, int64(len(r.commit))) {
		c, s, b := r.commit[i].Load(), r.start[i].Load(), r.began[i].Load()
		if c == 0 || s == 0 || b == 0 {
			continue
		}
		p := part{total: time.Duration(s - c), before: time.Duration(b - c), after: time.Duration(s - b)}
		if ret := r.returned[i].Load(); ret != 0 {
			p.call, p.dispatch, p.returned = time.Duration(ret-b), time.Duration(s-ret), true
		}
		all = append(all, p)
	}
	var out PickupSplit
	if len(all) == 0 {
		return out
	}
	out.Jobs = len(all)
	before := make([]time.Duration, len(all))
	after := make([]time.Duration, len(all))
	var calls, dispatches []time.Duration
	for i, p := range all {
		before[i], after[i] = p.before, p.after
		if p.before < 0 {
			out.ClaimBeganFirst++
		}
		if p.returned {
			calls, dispatches = append(calls, p.call), append(dispatches, p.dispatch)
		}
	}
	slices.Sort(before)
	slices.Sort(after)
	out.BeforeP50, out.AfterP50 = before[len(before)/2], after[len(after)/2]
	if out.Returned = len(calls); out.Returned > 0 {
		slices.Sort(calls)
		slices.Sort(dispatches)
		out.CallP50, out.DispatchP50 = calls[len(calls)/2], dispatches[len(dispatches)/2]
	}
	slices.SortFunc(all, func(x, y part) int { return cmp.Compare(x.total, y.total) })
	slow := all[len(all)-max(1, len(all)/50):]
	out.SlowFrom = slow[0].total
	returned := 0
	for _, p := range slow {
		out.SlowBefore += p.before
		out.SlowAfter += p.after
		if p.returned {
			out.SlowCall += p.call
			out.SlowDispatch += p.dispatch
			returned++
		}
	}
	out.SlowBefore /= time.Duration(len(slow))
	out.SlowAfter /= time.Duration(len(slow))
	if returned > 0 {
		out.SlowCall /= time.Duration(returned)
		out.SlowDispatch /= time.Duration(returned)
	}
	return out
}

// String is the split on one line, in milliseconds.
func (p PickupSplit) String() string {
	if p.Jobs == 0 {
		return "no job has a claim time"
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	s := fmt.Sprintf("%d jobs: insert returned → claim began p50 %.2f ms, claim began → handler p50 %.2f ms; "+
		"claim began first for %d; slowest 2%% (from %.1f ms): %.1f ms, %.1f ms",
		p.Jobs, ms(p.BeforeP50), ms(p.AfterP50), p.ClaimBeganFirst, ms(p.SlowFrom), ms(p.SlowBefore), ms(p.SlowAfter))
	if p.Returned > 0 {
		s += fmt.Sprintf("; claim began → returned p50 %.2f ms, returned → handler p50 %.2f ms, slowest 2%%: %.1f ms, %.1f ms",
			ms(p.CallP50), ms(p.DispatchP50), ms(p.SlowCall), ms(p.SlowDispatch))
	}
	return s
}

// PickupOrder divides pickup latency by the order the inserts committed
// in: a job is overtaken when a job with a higher id had committed (its
// insert call had returned) before its own insert call returned. A store
// that reads new jobs above the highest id it has seen (MariaDB's looks)
// may pass an overtaken job's id before its row is visible, and that job
// then waits for a claim that walks the queue's head. The count is a
// lower bound: a higher id that committed first but whose call returned
// later is not seen.
type PickupOrder struct {
	Jobs      int `json:"jobs"`      // jobs with an id and both times
	Overtaken int `json:"overtaken"` // of those, overtaken
	// Slowest is the slowest 1% of the jobs (at least one), SlowFrom the
	// least pickup among them and SlowOvertaken how many were overtaken.
	Slowest       int           `json:"slowest_1pct"`
	SlowFrom      time.Duration `json:"slowest_1pct_from_ns"`
	SlowOvertaken int           `json:"slowest_1pct_overtaken"`
	// P99 of the overtaken jobs' pickup and of the others'.
	OvertakenP99 time.Duration `json:"overtaken_p99_ns"`
	InOrderP99   time.Duration `json:"in_order_p99_ns"`
}

// Order returns the PickupOrder of the jobs below n (Jobs 0 when none
// has an id: the load recorded none).
func (r *PickupRecorder) Order(n int64) PickupOrder {
	type job struct {
		id, commit int64
		total      time.Duration
		overtaken  bool
	}
	var all []*job
	for i := range min(n, int64(len(r.commit))) {
		c, s, id := r.commit[i].Load(), r.start[i].Load(), r.ids[i].Load()
		if c == 0 || s == 0 || id == 0 {
			continue
		}
		all = append(all, &job{id: id, commit: c, total: max(0, time.Duration(s-c))})
	}
	var out PickupOrder
	if len(all) == 0 {
		return out
	}
	out.Jobs = len(all)
	slices.SortFunc(all, func(x, y *job) int { return cmp.Or(cmp.Compare(x.commit, y.commit), cmp.Compare(x.id, y.id)) })
	var highest int64 // the highest id committed before the job's own commit
	for i := 0; i < len(all); {
		// Jobs whose calls returned at the same instant overtake none of
		// each other.
		j := i
		for j < len(all) && all[j].commit == all[i].commit {
			all[j].overtaken = all[j].id < highest
			j++
		}
		for _, x := range all[i:j] {
			highest = max(highest, x.id)
		}
		i = j
	}
	var over, in []time.Duration
	for _, x := range all {
		if x.overtaken {
			out.Overtaken++
			over = append(over, x.total)
		} else {
			in = append(in, x.total)
		}
	}
	p99 := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[min(len(d)-1, len(d)*99/100)]
	}
	out.OvertakenP99, out.InOrderP99 = p99(over), p99(in)
	slices.SortFunc(all, func(x, y *job) int { return cmp.Compare(x.total, y.total) })
	slow := all[len(all)-max(1, len(all)/100):]
	out.Slowest, out.SlowFrom = len(slow), slow[0].total
	for _, x := range slow {
		if x.overtaken {
			out.SlowOvertaken++
		}
	}
	return out
}

// String is the order on one line, in milliseconds.
func (o PickupOrder) String() string {
	if o.Jobs == 0 {
		return "no job has an id"
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return fmt.Sprintf("%d jobs, %d overtaken (a higher id committed first); slowest 1%% (%d jobs, from %.1f ms): %d overtaken; "+
		"p99 overtaken %.1f ms, in order %.1f ms",
		o.Jobs, o.Overtaken, o.Slowest, ms(o.SlowFrom), o.SlowOvertaken, ms(o.OvertakenP99), ms(o.InOrderP99))
}

// Latencies returns the pickup latency of every job below n that has both
// times, stamped with its commit time, and how many started before their
// insert call had returned (counted as 0).
func (r *PickupRecorder) Latencies(n int64) (out []TimedLatency, early int) {
	out = make([]TimedLatency, 0, n)
	for i := range min(n, int64(len(r.commit))) {
		c, s := r.commit[i].Load(), r.start[i].Load()
		if c == 0 || s == 0 {
			continue
		}
		d := time.Duration(s - c)
		if d < 0 {
			early++
			d = 0
		}
		out = append(out, TimedLatency{at: time.Duration(c - 1), d: d})
	}
	return out, early
}

// SteadyLoad inserts jobs on a schedule of rate per second from producers
// goroutines, one job per insert transaction, through a client of its own.
type SteadyLoad struct {
	Client    *spool.Client
	Rate      float64
	Producers int
	Rec       *PickupRecorder
	next      atomic.Int64 // next sequence number to insert
	Inserted  atomic.Int64
	mu        sync.Mutex
	callTimes []TimedLatency // insert call latencies, at their start from rec.base
}

// openSteadyProducer opens a second backend on the store, as another
// process inserting jobs would, and an insert-only client over it; wake,
// when set, is the PostgreSQL wake-up mode of its inserts (spool_wake).
func openSteadyProducer(ctx context.Context, store *Store, wake string) (*spool.Client, func(), error) {
	dsn := store.Scratch.URL
	if wake != "" {
		if store.Backend.Name() != "postgres" {
			return nil, nil, fmt.Errorf("--wake: wake-up modes are PostgreSQL's, not %s's", store.Backend.Name())
		}
		var err error
		if dsn, err = SetURLParam(dsn, postgres.WakeParam, wake); err != nil {
			return nil, nil, fmt.Errorf("open producer: %w", err)
		}
	}
	be, err := backend.Open(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open producer: %w", err)
	}
	client, err := spool.NewClient(be, &spool.Config{})
	if err != nil {
		_ = be.Close()
		return nil, nil, fmt.Errorf("open producer: %w", err)
	}
	return client, func() { _ = be.Close() }, nil
}

// Run inserts up to total jobs; job i is due at start + i/rate. A producer
// that falls behind inserts at once; at until the producers stop whether or
// not they kept up, so that the load lasts as long as asked and the
// achieved rate shows any shortfall. It returns when the producers have
// stopped, or on the first error.
func (l *SteadyLoad) Run(ctx context.Context, start time.Time, total int64, until time.Time) error {
	interval := float64(time.Second) / l.Rate
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, l.Producers)
	for p := range l.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(0)
			defer timer.Stop()
			var calls []TimedLatency
			defer func() {
				l.mu.Lock()
				l.callTimes = append(l.callTimes, calls...)
				l.mu.Unlock()
			}()
			for {
				seq := l.next.Add(1) - 1
				due := start.Add(time.Duration(float64(seq) * interval))
				if seq >= total || !due.Before(until) || !time.Now().Before(until) {
					return
				}
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						errs[p] = ctx.Err()
						return
					case <-timer.C:
					}
				}
				begin := time.Now()
				res, err := l.Client.Insert(ctx, SteadyArgs{Seq: seq}, nil)
				if err != nil {
					errs[p] = fmt.Errorf("insert job %d: %w", seq, err)
					cancel()
					return
				}
				l.Rec.committed(seq)
				l.Rec.InsertedAs(seq, res.ID)
				calls = append(calls, TimedLatency{at: begin.Sub(l.Rec.Base), d: time.Since(begin)})
				l.Inserted.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return ctx.Err()
}

// WaitStarted waits until every inserted job's handler has started. It
// gives up when nothing moves for StallTimeout.
func WaitStarted(ctx context.Context, rec *PickupRecorder, inserted int64) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := int64(-1), time.Now()
	for {
		n := rec.started.Load()
		if n >= inserted {
			return nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > StallTimeout {
			return fmt.Errorf("only %d of %d jobs started, none in the last %s", n, inserted, StallTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d jobs started: %w", n, inserted, ctx.Err())
		case <-tick.C:
		}
	}
}

// steadyWorkerConfig holds the consumer settings steady and bloat share.
type steadyWorkerConfig struct {
	workers, prefetch *int
	pollInterval      *time.Duration
	completionDelay   *time.Duration
	deleteCompleted   *bool
	producers         *int
	rate              *float64
}

func addSteadyWorkerFlags(fs *flag.FlagSet) *steadyWorkerConfig {
	return &steadyWorkerConfig{
		rate:            fs.Float64("rate", 1000, "jobs inserted per second"),
		producers:       fs.Int("producers", 4, "inserting goroutines sharing the schedule"),
		workers:         fs.Int("workers", 100, "MaxWorkers of the queue"),
		prefetch:        fs.Int("prefetch", 100, "Prefetch of the queue (0: none)"),
		pollInterval:    fs.Duration("poll-interval", time.Second, "PollInterval of the client"),
		completionDelay: fs.Duration("completion-delay", 0, "CompletionDelay"),
		deleteCompleted: fs.Bool("delete-completed", false, "delete jobs as they complete"),
	}
}

// steadyWorkerUsage documents addSteadyWorkerFlags.
const steadyWorkerUsage = `	--rate N
		jobs inserted per second, one per insert transaction (default 1000)
	--producers N
		inserting goroutines sharing the schedule (default 4)
	--workers N
		MaxWorkers of the queue (default 100)
	--prefetch N
		Prefetch of the queue; 0 disables prefetch (default 100)
	--poll-interval DURATION
		PollInterval of the client (default 1s)
	--completion-delay DURATION
		CompletionDelay (default 0s)
	--delete-completed
		delete jobs as they complete
`

// checks are the flags' conditions, for ScenarioRun.check.
func (c *steadyWorkerConfig) checks() []Check {
	return []Check{
		Want(*c.rate > 0 && *c.rate <= 1e6, "--rate must be above 0 and at most 1000000"),
		Want(*c.producers >= 1 && *c.producers <= 1000, "--producers must be between 1 and 1000"),
		Want(*c.workers >= 1 && *c.workers <= 10000, "--workers must be between 1 and 10000"),
		Want(*c.prefetch >= 0 && *c.prefetch <= 100000, "--prefetch must be between 0 and 100000"),
		Want(*c.pollInterval >= time.Millisecond, "--poll-interval must be at least 1ms"),
		Want(*c.completionDelay >= 0, "--completion-delay must not be negative"),
	}
}

// jobsFor returns how many jobs the schedule inserts in d.
func (c *steadyWorkerConfig) jobsFor(d time.Duration) int64 {
	return max(1, int64(math.Round(*c.rate*d.Seconds())))
}

// newConsumer returns a client working the steady jobs on be, recording
// handler starts in rec.
func (c *steadyWorkerConfig) newConsumer(be backend.Backend, rec *PickupRecorder, logTo io.Writer) (*spool.Client, error) {
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[SteadyArgs]) error {
		rec.handlerStarted(j.Args.Seq)
		if j.AttemptedAt != nil {
			rec.ClaimBeganAt(j.Args.Seq, *j.AttemptedAt)
		}
		return nil
	})); err != nil {
		return nil, err
	}
	prefetch := *c.prefetch
	if prefetch == 0 {
		prefetch = -1 // spool: negative disables prefetch
	}
	retention := time.Duration(0)
	if *c.deleteCompleted {
		retention = -1
	}
	return spool.NewClient(be, &spool.Config{
		Workers:            ws,
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *c.workers, Prefetch: prefetch}},
		PollInterval:       *c.pollInterval,
		CompletionDelay:    *c.completionDelay,
		CompletedRetention: retention,
		Logger:             Logger(logTo),
	})
}

// steadyResult is the outcome of bench steady, as printed with --json.
type steadyResult struct {
	Scenario        string          `json:"scenario"`
	Backend         string          `json:"backend"`
	Store           string          `json:"store"`
	Kept            bool            `json:"kept"`
	TargetRate      float64         `json:"target_rate"`
	AchievedRate    float64         `json:"achieved_rate"`
	DurationS       float64         `json:"duration_s"`
	Scheduled       int64           `json:"scheduled"` // jobs the schedule called for
	Jobs            int64           `json:"jobs"`      // jobs inserted
	Started         int64           `json:"started"`
	Duplicates      int64           `json:"duplicates"`
	StartedEarly    int             `json:"started_before_insert_returned"`
	Pickup          LatencyStats    `json:"pickup_latency"`
	PickupSplit     PickupSplit     `json:"pickup_split"`
	PickupOrder     PickupOrder     `json:"pickup_order"`
	PickupOverTime  []latencyWindow `json:"pickup_latency_over_time"`
	InsertCall      LatencyStats    `json:"insert_call_latency"`
	Workers         int             `json:"workers"`
	Prefetch        int             `json:"prefetch"`
	Producers       int             `json:"producers"`
	Wake            string          `json:"wake,omitempty"`
	PollInterval    string          `json:"poll_interval"`
	CompletionDelay string          `json:"completion_delay"`
	DeleteCompleted bool            `json:"delete_completed"`
	GOMAXPROCS      int             `json:"gomaxprocs"`
	// ClientCPUPerJobUS is this process's CPU time (the inserting and the
	// working client together) per job inserted, in microseconds, from the
	// first insert until every job started; ServerCPUPerJobUS that of the
	// machine's database servers (not measured for SQLite, whose store is
	// in this process).
	ClientCPUPerJobUS float64 `json:"client_cpu_per_job_us,omitempty"`
	ServerCPUPerJobUS float64 `json:"server_cpu_per_job_us,omitempty"`
	// SessionCPUPerJobUS is the part of ServerCPUPerJobUS spent by the
	// server processes of the run's own sessions (PostgreSQL on this
	// machine only): unlike it, it leaves out other load on the server,
	// and also the server's own background work (WAL writer, autovacuum).
	SessionCPUPerJobUS float64 `json:"session_cpu_per_job_us,omitempty"`
}

// Run implements cli.Command.
func (c *BenchSteadyCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench steady")
	cfg := addSteadyWorkerFlags(r.Flags)
	duration := r.Flags.Duration("duration", 60*time.Second, "how long to insert")
	wake := r.Flags.String("wake", "", "PostgreSQL: the inserting client's wake-up mode, after, commit or off (default: the backend's, after)")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(append([]Check{
		Want(*duration > 0, "--duration must be positive"),
		Want(*wake == "" || *wake == "after" || *wake == "commit" || *wake == "off", "--wake must be after, commit or off"),
	}, cfg.checks()...)...); err != nil {
		return err
	}
	total := cfg.jobsFor(*duration)
	if total > 50_000_000 {
		return cli.Usagef(r.Name, "--rate × --duration is %d jobs; at most 50,000,000", total)
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	stderr := r.Stderr
	producer, closeProducer, err := openSteadyProducer(ctx, store, *wake)
	if err != nil {
		return fmt.Errorf("bench steady: %w", err)
	}
	r.AtEnd(closeProducer)

	base := time.Now()
	rec := NewPickupRecorder(base, total)
	consumer, err := cfg.newConsumer(store.Backend, rec, stderr)
	if err != nil {
		return fmt.Errorf("bench steady: %w", err)
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	if err := consumer.Start(ctx); err != nil {
		return fmt.Errorf("bench steady: %w", err)
	}
	r.stopAtEnd(consumer)

	load := &SteadyLoad{Client: producer, Rate: *cfg.rate, Producers: *cfg.producers, Rec: rec}
	bar := r.Progress("steady", "jobs", total, load.Inserted.Load)
	cpu := startCPUSpan(func() []int { return store.sessionPIDs(ctx) })
	start := time.Now()
	err = load.Run(ctx, start, total, start.Add(*duration))
	insertTime := time.Since(start)
	if err == nil {
		err = WaitStarted(ctx, rec, load.Inserted.Load())
	}
	clientCPU, serverCPU, sessionCPU := cpu.perJob(int(load.Inserted.Load()), store.Backend.Name())
	bar.Stop()
	if err != nil {
		return WithCause(ctx, fmt.Errorf("bench steady: %w", err))
	}

	samples, early := rec.Latencies(total)
	res := steadyResult{
		Scenario:        "steady",
		Backend:         store.Backend.Name(),
		Store:           store.Scratch.Name,
		Kept:            store.Keep,
		TargetRate:      *cfg.rate,
		AchievedRate:    cli.Rate(load.Inserted.Load(), insertTime),
		DurationS:       duration.Seconds(),
		Scheduled:       total,
		Jobs:            load.Inserted.Load(),
		Started:         rec.started.Load(),
		Duplicates:      rec.Duplicates.Load(),
		StartedEarly:    early,
		PickupSplit:     rec.Split(total),
		PickupOrder:     rec.Order(total),
		PickupOverTime:  latencyWindows(samples, time.Second),
		Workers:         *cfg.workers,
		Prefetch:        *cfg.prefetch,
		Producers:       *cfg.producers,
		Wake:            *wake,
		PollInterval:    cfg.pollInterval.String(),
		CompletionDelay: cfg.completionDelay.String(),
		DeleteCompleted: *cfg.deleteCompleted,
		GOMAXPROCS:      runtime.GOMAXPROCS(0),
	}
	res.ClientCPUPerJobUS, res.ServerCPUPerJobUS, res.SessionCPUPerJobUS = clientCPU, serverCPU, sessionCPU
	ds := Durations(samples)
	res.Pickup = Summarize(ds) // sorts ds
	res.InsertCall = Summarize(Durations(load.callTimes))
	return r.Finish(res, func(w io.Writer) error { return printSteadyResult(w, &res) },
		func() *plot.Figure { return steadyFigure(&res, ds) })
}

// stopClient stops a started client softly, reporting a failure on w.
func stopClient(w io.Writer, cmd string, client *spool.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		fmt.Fprintf(w, "spool: %s: stop client: %v\n", cmd, err)
	}
}

// steadyFigure draws the latency CDF and the latency over time.
func steadyFigure(r *steadyResult, sorted []time.Duration) *plot.Figure {
	p50, p99, worst := windowSeries(r.PickupOverTime)
	return &plot.Figure{
		Title: fmt.Sprintf("steady: pickup latency at %s jobs/s for %gs (%s)", cli.HumanInt(r.TargetRate), r.DurationS, r.Backend),
		Charts: []*plot.Chart{
			{
				Title:  fmt.Sprintf("Latency CDF: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms", r.Pickup.P50, r.Pickup.P99, r.Pickup.P999),
				XLabel: "pickup latency (ms, insert commit → handler start)", YLabel: "fraction of jobs",
				XScale: plot.Log, Y: plot.Range{Min: 0, Max: 1},
				Lines: []plot.Line{{Name: "all jobs", Points: cdfPoints(sorted, 500)}},
			},
			{
				Title:  "Latency over time (1 s windows)",
				XLabel: "time (s)", YLabel: "pickup latency (ms)", YScale: plot.Log, XFromZero: true,
				Lines: []plot.Line{{Name: "p50", Points: p50}, {Name: "p99", Points: p99}, {Name: "max", Points: worst, Width: 1}},
			},
		},
	}
}

// printSteadyResult prints the result as a small table.
func printSteadyResult(w io.Writer, r *steadyResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"scenario", r.Scenario},
		{"rate target/achieved", fmt.Sprintf("%s / %s jobs/s", cli.HumanInt(r.TargetRate), cli.HumanInt(r.AchievedRate))},
		{"duration", fmt.Sprintf("%gs", r.DurationS)},
		{"jobs scheduled/inserted/started", fmt.Sprintf("%d / %d / %d", r.Scheduled, r.Jobs, r.Started)},
		{"pickup p50", fmtMS(r.Pickup.P50)},
		{"pickup p95", fmtMS(r.Pickup.P95)},
		{"pickup p99", fmtMS(r.Pickup.P99)},
		{"pickup p99.9", fmtMS(r.Pickup.P999)},
		{"pickup max", fmtMS(r.Pickup.Max)},
		{"insert call p50/p99", fmtMS(r.InsertCall.P50) + " / " + fmtMS(r.InsertCall.P99)},
		{"started before insert returned", fmt.Sprintf("%d (counted as 0 ms)", r.StartedEarly)},
		{"pickup split at the claim", r.PickupSplit.String()},
		{"pickup by commit order", r.PickupOrder.String()},
		{"duplicates", fmt.Sprint(r.Duplicates)},
		{"client CPU per job", usText(r.ClientCPUPerJobUS)},
		{"server CPU per job", usText(r.ServerCPUPerJobUS)},
		{"  of it, its sessions", usText(r.SessionCPUPerJobUS)},
		{"workers", fmt.Sprint(r.Workers)},
		{"prefetch", fmt.Sprint(r.Prefetch)},
		{"producers", fmt.Sprint(r.Producers)},
		{"backend", r.Backend},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// fmtMS formats milliseconds for a table.
func fmtMS(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// Usage implements cli.Command.
func (c *BenchSteadyCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench steady [flags]

Creates a scratch store and starts one client working it. A second client,
on a connection pool of its own as another process would be, inserts jobs on
a fixed schedule (--rate per second, one job per insert transaction) for
--duration. Pickup latency is measured per job from the moment its insert
call returned (the commit done) to the moment its handler started, on the
same process clock. Prints p50/p95/p99/p99.9/max, the rate achieved, the
latency per second of the run, and the CPU time per job of this process
(both clients) and of the machine's database servers (PostgreSQL, MariaDB
or MySQL processes, other sessions' work included; none for SQLite), and on
PostgreSQL on this machine the part of it spent by the run's own sessions,
which leaves other load on the server out (and the server's background
work: WAL writer, autovacuum).

Each job's pickup is also split at the moment the claim that took it began
(the job's attempted_at, by the store's clock): before it, the wake-up and
the claim's wait for its turn; after it, the claim's statement, its commit
and reply, and the handler's dispatch.

The insert call returns a little after the server committed, so a job
picked up by a claim that was already under way can start before its insert
call has returned. Such jobs count as 0 ms and are reported separately.

Flags:

	--duration DURATION
		how long to insert (default 1m0s)
	--wake MODE
		PostgreSQL: the inserting client's wake-up mode (spool_wake):
		after (the default), commit (NOTIFY in each insert's
		transaction) or off (the worker polls)
`+steadyWorkerUsage+PlotUsage+CommonUsage, "\n")
}
