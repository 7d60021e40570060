package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerBenchScenario("ceiling", "the store's own ceiling: claim-and-complete loops with no Spool runtime in the way",
		func(m *cli.Env) cli.Command { return &BenchCeilingCommand{m: m} })
}

// BenchCeilingCommand measures how fast the database itself claims and
// completes jobs when nothing but a tight loop of statements drives it, so
// that drain figures can be given as a fraction of what the server can do.
type BenchCeilingCommand struct{ m *cli.Env }

// ceilingSession is one session of a ceiling loop.
type ceilingSession struct {
	// step claims and completes one batch and returns how many jobs it
	// finished; 0 means nothing was left to claim.
	step func(ctx context.Context) (int, error)
	// close releases the session.
	close func()
	// spent, when not nil, is the wall time the session spent in each of
	// its statements so far, by name (updated by step).
	spent map[string]time.Duration
}

// ceilingVariant is one way to claim and complete jobs in a loop.
type ceilingVariant struct {
	Name  string
	About string
	// open starts session number session, claiming batch jobs at a time.
	open func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error)
	// alter, when not nil, applies --alter (clauses of an ALTER TABLE) to
	// the variant's table once its sessions are open.
	alter func(ctx context.Context, be backend.Backend, clauses string) error
}

// ceilingVariants maps backend names (backend.Backend.Name) to the loops of
// the store's own statements, with no Spool code in the way;
// ceiling_<backend>.go files fill it in init functions.
var ceilingVariants = map[string][]ceilingVariant{}

// backendCeilingVariants run on every backend: Spool's own claim and finish
// statements, called through the backend interface with no producer,
// workers or outcome writer.
var backendCeilingVariants = []ceilingVariant{
	{
		Name:  "spool-keep",
		About: "Spool's claim and finish statements via the backend (JobClaim, JobFinishMany), completed rows kept",
		open:  backendCeilingSession(false),
	},
	{
		Name:  "spool-delete",
		About: "as spool-keep, completed rows deleted (DeleteCompleted)",
		open:  backendCeilingSession(true),
	},
}

// backendCeilingSession returns the open function of a backend variant.
func backendCeilingSession(deleteCompleted bool) func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
	return func(_ context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
		n := 0
		step := func(ctx context.Context) (int, error) {
			n++
			rows, err := be.JobClaim(ctx, &backend.JobClaimParams{
				Queue: spool.DefaultQueue, Max: batch, Lease: time.Minute,
				ClaimID: fmt.Sprintf("spool-bench-ceiling-%d#%d", session, n),
			})
			if err != nil || len(rows) == 0 {
				return 0, err
			}
			fs := make([]backend.JobFinish, len(rows))
			for i, r := range rows {
				fs[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
			}
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: deleteCompleted})
			if err != nil {
				return 0, err
			}
			if len(res.Rejected) > 0 {
				return 0, fmt.Errorf("finish jobs: %d of %d leases rejected", len(res.Rejected), len(fs))
			}
			return len(rows), nil
		}
		return &ceilingSession{step: step, close: func() {}}, nil
	}
}

// allCeilingVariantNames lists every variant any backend knows, for
// validating --variants before a store is opened.
func allCeilingVariantNames() []string {
	var names []string
	for _, v := range backendCeilingVariants {
		names = append(names, v.Name)
	}
	for _, vs := range ceilingVariants {
		for _, v := range vs {
			if !slices.Contains(names, v.Name) {
				names = append(names, v.Name)
			}
		}
	}
	return names
}

// ceilingRow is one variant's result.
type ceilingRow struct {
	Name     string    `json:"name"`
	About    string    `json:"about"`
	JobsPerS float64   `json:"jobs_per_s"` // median over rounds
	Runs     []float64 `json:"runs_jobs_per_s"`
	// CPUPerJobUS is this process's CPU per job during the loops, median
	// over rounds (Linux only): for SQLite, which runs in the process, the
	// whole cost of the statements; for a server, the client's share.
	CPUPerJobUS float64   `json:"cpu_per_job_us,omitempty"`
	CPURuns     []float64 `json:"runs_cpu_per_job_us,omitempty"`
	// Batch is the jobs claimed per statement.
	Batch int `json:"batch"`
	// StatementUS is, by statement, the median over rounds of the
	// sessions' wall time in it per job, in µs (loops that time theirs).
	StatementUS   map[string]float64   `json:"statement_us_per_job,omitempty"`
	StatementRuns map[string][]float64 `json:"statement_runs_us,omitempty"`
	// ServerCPUPerJobUS is the median over rounds of the database servers'
	// CPU time per job during the loop (all of the machine's server
	// processes, so other sessions' work too; 0 when not measured).
	ServerCPUPerJobUS float64   `json:"server_cpu_per_job_us"`
	ServerCPURuns     []float64 `json:"server_cpu_runs_us"`
}

// drainBeside is a drain run in the same rounds as the ceiling loops.
type drainBeside struct {
	Name     string    `json:"name"`
	Flags    []string  `json:"flags"`
	JobsPerS float64   `json:"jobs_per_s"` // median over rounds
	Runs     []float64 `json:"runs_jobs_per_s"`
	// ServerCPUPerJobUS is the median of the drains' server CPU per job.
	ServerCPUPerJobUS float64   `json:"server_cpu_per_job_us"`
	ServerCPURuns     []float64 `json:"server_cpu_runs_us"`
	// CPUPerJobUS is the median of the drains' own CPU per job (bench
	// drain's client CPU: this process's, which holds SQLite's too).
	CPUPerJobUS float64   `json:"cpu_per_job_us,omitempty"`
	CPURuns     []float64 `json:"cpu_runs_us,omitempty"`
	// FractionOf is the drain's median over each variant's median.
	FractionOf map[string]float64 `json:"fraction_of"`
}

// ceilingResult is the outcome of lab ceiling, as printed with --json.
type ceilingResult struct {
	Scenario   string        `json:"scenario"`
	Backend    string        `json:"backend"`
	Jobs       int           `json:"jobs"`
	Batch      int           `json:"batch"`
	LoopBatch  int           `json:"loop_batch"`
	Alter      string        `json:"alter,omitempty"`
	Sessions   int           `json:"sessions"`
	Rounds     int           `json:"rounds"`
	Variants   []ceilingRow  `json:"variants"`
	Drains     []drainBeside `json:"drains,omitempty"`
	Stores     []string      `json:"stores"` // the scratch stores of the loops, in order
	GOMAXPROCS int           `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchCeilingCommand) Run(ctx context.Context, args []string) error {
	run := bench.NewScenarioRun(c.m, "ceiling")
	fs := run.Flags
	jobs := fs.Int("jobs", 100000, "jobs per loop")
	batch := fs.Int("batch", 1000, "jobs claimed and completed per statement")
	loopBatch := fs.Int("loop-batch", 0, "batch of the backend's own raw loops (default: --batch)")
	sessions := fs.Int("sessions", 2, "concurrent sessions")
	variantList := fs.String("variants", "", "comma-separated variants (default: all the backend has)")
	rounds := fs.Int("rounds", 1, "rounds; variants alternate within each")
	compareDrain := fs.Bool("compare-drain", false, "run bench drain (kept and deleted completions) in each round too")
	drainFlags := fs.String("drain-flags", "", "more flags for the drains of --compare-drain, as one string")
	chunk := fs.Int("insert-chunk", 10000, "jobs per InsertMany call")
	alter := fs.String("alter", "", "ALTER TABLE clauses applied to the raw loops' table before they run")
	loopOmit := fs.String("loop-omit", "", "MySQL: parts of Spool's statements the stmt-spool loops leave out (comma-separated: "+
		strings.Join(mysqlStatementParts, ", ")+")")
	if err := run.Parse(args, c.Usage()); err != nil {
		return err
	}
	mysqlLoopOmit = nil
	for _, p := range strings.Split(*loopOmit, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(mysqlStatementParts, p) {
			return cli.Usagef(run.Name, "unknown --loop-omit part %q (want some of %s)", p, strings.Join(mysqlStatementParts, ", "))
		}
		mysqlLoopOmit = append(mysqlLoopOmit, p)
	}
	var wanted []string
	if *variantList != "" {
		known := allCeilingVariantNames()
		for _, v := range strings.Split(*variantList, ",") {
			v = strings.TrimSpace(v)
			if !slices.Contains(known, v) {
				return cli.Usagef(run.Name, "unknown variant %q (want some of %s)", v, strings.Join(known, ", "))
			}
			wanted = append(wanted, v)
		}
	}
	if err := run.Check(
		bench.Want(*jobs >= 1, "--jobs must be at least 1"),
		bench.Want(*batch >= 1 && *batch <= 100000, "--batch must be between 1 and 100000"),
		bench.Want(*loopBatch >= 0 && *loopBatch <= 100000, "--loop-batch must be between 0 and 100000"),
		bench.Want(*sessions >= 1 && *sessions <= 64, "--sessions must be between 1 and 64"),
		bench.Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"),
		bench.Want(*chunk >= 1, "--insert-chunk must be at least 1"),
	); err != nil {
		return err
	}
	dsn, err := cli.DatabaseURL(*run.Common.DBURL)
	if err != nil {
		return err
	}
	ctx = run.Begin(ctx)
	defer run.End()
	if err := run.StartProfile(); err != nil {
		return err
	}
	if *loopBatch == 0 {
		*loopBatch = *batch
	}
	r := &ceilingRun{run: run, jobs: *jobs, batch: *batch, sessions: *sessions, chunk: *chunk, alter: *alter}
	res := ceilingResult{Scenario: "ceiling", Jobs: *jobs, Batch: *batch, LoopBatch: *loopBatch, Alter: *alter, Sessions: *sessions, Rounds: *rounds,
		GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if *drainFlags != "" && !*compareDrain {
		return cli.Usagef(run.Name, "--drain-flags needs --compare-drain")
	}
	var drains []drainBeside
	if *compareDrain {
		extra := strings.Fields(*drainFlags)
		name := strings.Join(append([]string{"drain"}, extra...), " ")
		drains = []drainBeside{
			{Name: name, Flags: extra},
			{Name: name + " --delete-completed", Flags: append(slices.Clone(extra), "--delete-completed")},
		}
	}
	var variants []ceilingVariant
	for round := 0; round < *rounds; round++ {
		if round == 0 {
			// The backend is known once a store is open: the first loop
			// decides which variants exist.
			be, err := r.backendName(ctx)
			if err != nil {
				return err
			}
			res.Backend = be
			if variants, err = chooseCeilingVariants(be, wanted); err != nil {
				return err
			}
			for _, v := range variants {
				if *alter != "" && v.alter == nil {
					return cli.Usagef(run.Name, "variant %s does not take --alter", v.Name)
				}
				b := *loopBatch
				if slices.ContainsFunc(backendCeilingVariants, func(s ceilingVariant) bool { return s.Name == v.Name }) {
					b = *batch
				}
				res.Variants = append(res.Variants, ceilingRow{Name: v.Name, About: v.About, Batch: b})
			}
		}
		for i, v := range variants {
			jps, cpu, storeName, err := r.runVariant(ctx, v, res.Variants[i].Batch)
			if err != nil {
				return bench.WithCause(ctx, fmt.Errorf("lab ceiling: %s: %w", v.Name, err))
			}
			res.Stores = append(res.Stores, storeName)
			res.Variants[i].Runs = append(res.Variants[i].Runs, jps)
			res.Variants[i].ServerCPURuns = append(res.Variants[i].ServerCPURuns, cpu.server)
			if cpu.process > 0 {
				res.Variants[i].CPURuns = append(res.Variants[i].CPURuns, cpu.process)
			}
			for name, us := range cpu.statements {
				if res.Variants[i].StatementRuns == nil {
					res.Variants[i].StatementRuns = map[string][]float64{}
				}
				res.Variants[i].StatementRuns[name] = append(res.Variants[i].StatementRuns[name], us)
			}
		}
		for i := range drains {
			jps, cpu, err := r.runDrain(ctx, dsn, drains[i].Flags)
			if err != nil {
				return bench.WithCause(ctx, fmt.Errorf("lab ceiling: %s: %w", drains[i].Name, err))
			}
			drains[i].Runs = append(drains[i].Runs, jps)
			drains[i].ServerCPURuns = append(drains[i].ServerCPURuns, cpu.server)
			if cpu.process > 0 {
				drains[i].CPURuns = append(drains[i].CPURuns, cpu.process)
			}
		}
	}
	for i := range res.Variants {
		res.Variants[i].JobsPerS = bench.Median(res.Variants[i].Runs)
		res.Variants[i].ServerCPUPerJobUS = bench.Median(res.Variants[i].ServerCPURuns)
		if len(res.Variants[i].CPURuns) > 0 {
			res.Variants[i].CPUPerJobUS = bench.Median(res.Variants[i].CPURuns)
		}
		for name, runs := range res.Variants[i].StatementRuns {
			if res.Variants[i].StatementUS == nil {
				res.Variants[i].StatementUS = map[string]float64{}
			}
			res.Variants[i].StatementUS[name] = bench.Median(runs)
		}
	}
	for i := range drains {
		d := &drains[i]
		d.JobsPerS = bench.Median(d.Runs)
		d.ServerCPUPerJobUS = bench.Median(d.ServerCPURuns)
		if len(d.CPURuns) > 0 {
			d.CPUPerJobUS = bench.Median(d.CPURuns)
		}
		d.FractionOf = map[string]float64{}
		for _, v := range res.Variants {
			if v.JobsPerS > 0 {
				d.FractionOf[v.Name] = d.JobsPerS / v.JobsPerS
			}
		}
	}
	res.Drains = drains
	return run.Finish(res, func(w io.Writer) error { return printCeilingResult(w, &res) },
		func() *plot.Figure { return ceilingFigure(&res) })
}

// chooseCeilingVariants returns the variants of a backend, in order, keeping
// only the wanted ones when some are named.
func chooseCeilingVariants(backendName string, wanted []string) ([]ceilingVariant, error) {
	all := slices.Clone(backendCeilingVariants)
	all = append(all, ceilingVariants[backendName]...)
	if len(wanted) == 0 {
		return all, nil
	}
	var out []ceilingVariant
	for _, w := range wanted {
		i := slices.IndexFunc(all, func(v ceilingVariant) bool { return v.Name == w })
		if i < 0 {
			return nil, fmt.Errorf("lab ceiling: variant %q is %w (%s)", w, bench.ErrNotSupported, backendName)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// ceilingRun holds the settings of one lab ceiling invocation.
type ceilingRun struct {
	run                   *bench.ScenarioRun
	jobs, sessions, chunk int
	batch                 int // of the drains' --compare-drain defaults and Spool's variants
	alter                 string
}

// variantCost is what a variant's loop cost per job besides wall time.
type variantCost struct {
	server     float64            // the servers' CPU µs
	process    float64            // this process's CPU µs (0: not measured)
	statements map[string]float64 // the sessions' wall µs in each statement
}

// backendName opens and drops a scratch store to learn the backend's name.
func (r *ceilingRun) backendName(ctx context.Context) (string, error) {
	store, closeStore, err := r.run.OpenStoreFor(ctx)
	if err != nil {
		return "", err
	}
	name := store.Backend.Name()
	store.Keep = false // nothing in it worth keeping
	if err := closeStore(); err != nil {
		return "", err
	}
	return name, nil
}

// runVariant fills a fresh store with the jobs and times the variant's
// sessions, batch jobs a claim, until they have claimed and completed all
// of them; it returns jobs/s and the servers' CPU µs per job.
func (r *ceilingRun) runVariant(ctx context.Context, v ceilingVariant, batch int) (jobsPerS float64, cost variantCost, storeName string, err error) {
	store, closeStore, err := r.run.OpenStoreFor(ctx)
	if err != nil {
		return 0, cost, "", err
	}
	storeName = store.Scratch.Name
	defer func() {
		if cerr := closeStore(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	client, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.run.Logger()})
	if err != nil {
		return 0, cost, storeName, err
	}
	var inserted atomic.Int64
	bar := r.run.Progress("insert", "jobs", int64(r.jobs), inserted.Load)
	_, err = bench.InsertJobs(ctx, client, spool.DefaultQueue, r.jobs, r.chunk, false, &inserted)
	bar.Stop()
	if err != nil {
		return 0, cost, storeName, err
	}

	sessions := make([]*ceilingSession, r.sessions)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.close()
			}
		}
	}()
	for i := range sessions {
		if sessions[i], err = v.open(ctx, store.Backend, batch, i); err != nil {
			return 0, cost, storeName, err
		}
	}
	if r.alter != "" {
		if err := v.alter(ctx, store.Backend, r.alter); err != nil {
			return 0, cost, storeName, fmt.Errorf("--alter: %w", err)
		}
	}
	var finished atomic.Int64
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			for {
				n, err := s.step(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				if n == 0 {
					return
				}
				finished.Add(int64(n))
			}
		}()
	}
	bar = r.run.Progress(v.Name, "jobs", int64(r.jobs), finished.Load)
	cpu0, cpuOK := bench.ProcessCPU()
	cpu := bench.StartServerCPU()
	start := time.Now()
	close(startGate)
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, _ := bench.ProcessCPU()
	cost.server = cpu.PerJob(r.jobs)
	if cpuOK {
		cost.process = float64((cpu1 - cpu0).Microseconds()) / float64(r.jobs)
	}
	for _, s := range sessions {
		for name, d := range s.spent {
			if cost.statements == nil {
				cost.statements = map[string]float64{}
			}
			cost.statements[name] += bench.PerJobUS(d, r.jobs)
		}
	}
	bar.Stop()
	for _, err := range errs {
		if err != nil {
			return 0, cost, storeName, err
		}
	}
	if got := finished.Load(); got != int64(r.jobs) {
		return 0, cost, storeName, fmt.Errorf("the sessions finished %d of %d jobs", got, r.jobs)
	}
	stats, err := bench.QueueStats(ctx, client, spool.DefaultQueue)
	if err != nil {
		return 0, cost, storeName, fmt.Errorf("check results: %w", err)
	}
	if bench.PendingCount(stats) != 0 {
		return 0, cost, storeName, fmt.Errorf("jobs left after the loop: %s", bench.FormatCounts(stats))
	}
	return cli.Rate(int64(r.jobs), elapsed), cost, storeName, nil
}

// drainCPU is a drain's CPU per job, in µs: the servers' and its own.
type drainCPU struct{ server, process float64 }

// runDrain runs bench drain with the same job count on a store of its own
// and returns its jobs/s and CPU µs per job.
func (r *ceilingRun) runDrain(ctx context.Context, dsn string, flags []string) (float64, drainCPU, error) {
	args := []string{"--jobs", strconv.Itoa(r.jobs), "--json", "--insert-chunk", strconv.Itoa(r.chunk), "--database-url", dsn}
	if *r.run.Common.Quiet {
		args = append(args, "--quiet")
	}
	args = append(args, flags...)
	var out bytes.Buffer
	sub := &cli.Env{Stdout: &out, Stderr: r.run.Stderr, StderrTerminal: r.run.Env.StderrTerminal}
	if err := bench.NewDrainCommand(sub).Run(ctx, args); err != nil {
		return 0, drainCPU{}, err
	}
	var res struct {
		JobsPerS          float64 `json:"jobs_per_s"`
		ServerCPUPerJobUS float64 `json:"server_cpu_per_job_us"`
		ClientCPUPerJobUS float64 `json:"client_cpu_per_job_us"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return 0, drainCPU{}, fmt.Errorf("read drain result: %w", err)
	}
	return res.JobsPerS, drainCPU{server: res.ServerCPUPerJobUS, process: res.ClientCPUPerJobUS}, nil
}

// ceilingFigure draws the medians as bars.
func ceilingFigure(r *ceilingResult) *plot.Figure {
	var bars []plot.Bar
	for _, v := range r.Variants {
		bars = append(bars, plot.Bar{Label: v.Name, Value: v.JobsPerS})
	}
	for _, d := range r.Drains {
		bars = append(bars, plot.Bar{Label: d.Name, Value: d.JobsPerS})
	}
	return &plot.Figure{
		Title: fmt.Sprintf("ceiling: %s jobs in batches of %d, %d sessions (%s)", cli.HumanInt(float64(r.Jobs)), r.Batch, r.Sessions, r.Backend),
		Charts: []*plot.Chart{{
			Title: fmt.Sprintf("Jobs per second, median of %d round(s)", r.Rounds), YLabel: "jobs/s", Bars: bars,
		}},
	}
}

// printCeilingResult prints the variants, then the drains as fractions of
// each variant.
func printCeilingResult(w io.Writer, r *ceilingResult) error {
	fmt.Fprintf(w, "ceiling: %s jobs, batches of %d, %d sessions, %d round(s), %s\n\n",
		cli.HumanInt(float64(r.Jobs)), r.Batch, r.Sessions, r.Rounds, r.Backend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIANT\tBATCH\tJOBS/S\tRUNS\tSERVER µs/JOB\tCPU µs/JOB\tWHAT")
	for _, v := range r.Variants {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Batch, cli.HumanInt(v.JobsPerS), bench.FormatRuns(v.Runs),
			cpuText(v.ServerCPUPerJobUS), cpuText(v.CPUPerJobUS), v.About)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printStatementCosts(w, r.Variants); err != nil {
		return err
	}
	if len(r.Drains) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"DRAIN", "JOBS/S", "RUNS", "SERVER µs/JOB", "CPU µs/JOB"}
	for _, v := range r.Variants {
		head = append(head, "OF "+v.Name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, d := range r.Drains {
		row := []string{d.Name, cli.HumanInt(d.JobsPerS), bench.FormatRuns(d.Runs), cpuText(d.ServerCPUPerJobUS), cpuText(d.CPUPerJobUS)}
		for _, v := range r.Variants {
			row = append(row, fmt.Sprintf("%.0f%%", 100*d.FractionOf[v.Name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// printStatementCosts prints, for the loops that time their statements, the
// sessions' wall time per job in each.
func printStatementCosts(w io.Writer, vs []ceilingRow) error {
	var names []string
	for _, v := range vs {
		for name := range v.StatementUS {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WALL µs/JOB\t"+strings.Join(names, "\t"))
	for _, v := range vs {
		if len(v.StatementUS) == 0 {
			continue
		}
		row := []string{v.Name}
		for _, name := range names {
			row = append(row, cpuText(v.StatementUS[name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// cpuText formats a CPU time per job, "-" when it was not measured.
func cpuText(us float64) string {
	if us <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", us)
}

// Usage implements cli.Command.
func (c *BenchCeilingCommand) Usage() string {
	return strings.TrimLeft(`
Usage: lab ceiling [flags]

Measures the store's own ceiling for Spool's work: for each variant, a fresh
scratch store gets N jobs (InsertMany, as bench drain inserts them), then
--sessions sessions loop "claim a batch, complete it" with nothing else in
the way until no job is left. jobs/s = N / wall time of the loops.
CPU µs/JOB is this process's CPU per job during the loops (Linux): for
SQLite, which runs inside the process, the whole cost of the statements,
and steadier than jobs/s on a loaded machine; for a server, the client's
share only.

Variants:
	spool-keep    Spool's own claim and finish statements, called through the
	              backend interface (JobClaim, JobFinishMany); no producer,
	              workers or outcome writer. Completed rows are kept.
	spool-delete  the same, deleting completed rows.
	cte-keep      (PostgreSQL) a minimal claim by materialised CTE with
	              FOR UPDATE SKIP LOCKED, then an UPDATE marking the batch
	              completed by id array: the ceiling of a drain that keeps
	              completed rows.
	cte-delete    (PostgreSQL) the same claim, then DELETE by id array.
	min-keep      (MySQL) the minimal hand-written loop on a minimal table
	              (id, queue, priority, run_at, state, args; one index
	              (queue, state, priority, run_at, id)), per session:
	              BEGIN, SELECT … ORDER BY priority, run_at, id LIMIT n
	              FOR UPDATE SKIP LOCKED, UPDATE SET state = 'running'
	              WHERE id IN (…), COMMIT; then UPDATE SET state =
	              'completed' by ids. The table ends with the wall time
	              each statement took per job.
	min-delete    (MySQL) the same, then DELETE by ids.
	min-spool-keep, min-spool-delete
	              (MySQL) the same statements on Spool's spool_jobs (the
	              claim UPDATE also sets the lease end its rules require):
	              what Spool's table costs apart from its statements.
	claim-delete  (PostgreSQL) one statement per batch: the CTE feeding a
	              DELETE.
	lease-delete  (PostgreSQL) a lease row per batch: the claim moves the
	              batch out of the jobs table into one row of a lease
	              table; completing deletes that row (one row write per
	              job instead of two).
	lease-keep    (PostgreSQL) as lease-delete; completing moves the jobs
	              into an insert-only table of finished jobs.
	min-keep      (SQLite) a minimal table (id, queue, priority, run_at,
	              state, args; one partial index of pending rows), filled
	              with the store's jobs before the clock starts: BEGIN
	              IMMEDIATE, UPDATE … WHERE id IN (SELECT … LIMIT B)
	              RETURNING id, COMMIT, then UPDATE … SET state =
	              'completed' WHERE id IN (ids) in its own transaction.
	min-delete    (SQLite) the same, then DELETE … WHERE id IN (ids).
	raw-keep      (SQLite) the minimal statements on spool_jobs (the claim
	              also sets fence, attempt and the lease): what the table
	              costs without Spool's code.
	raw-delete    (SQLite) the same, then DELETE by ids.
The PostgreSQL sessions plan their claims as Spool does (enable_sort and
enable_bitmapscan off). SQLite's sessions share the backend's one writer
connection, as Spool's writes do, so --sessions 1 is the natural setting;
its loops are fastest at batches of about 1,000 to 2,000 (BENCHMARKS.md).

With --compare-drain each round also runs bench drain on the same number of
jobs (completed rows kept, then deleted), and the table gives each drain as
a fraction of each variant: the share of the server's ceiling Spool reaches,
and each drain's own CPU per job (bench drain's client CPU; for SQLite,
which runs in the process, the whole cost).

One round is one run of each variant: its figure moves with whatever else
the machine does. For a stable median use --rounds 5 and compare within
rounds (the JSON keeps each round's runs). On the 2-core test machine one
MariaDB round of the min-* loops and both drains took about 2 minutes for
--jobs 100000 at load 12, and 12-20 minutes for --jobs 300000 at load
30-45, where single rounds differed by up to 2x.

Flags:

	--jobs N
		jobs per loop (default 100000)
	--batch N
		jobs claimed and completed per statement (default 1000)
	--sessions N
		concurrent sessions (default 2)
	--variants LIST
		comma-separated variants to run (default: all the backend has)
	--rounds N
		rounds; the variants (and drains) alternate within each, and the
		table shows medians (default 1)
	--compare-drain
		run bench drain beside the loops in every round
	--drain-flags FLAGS
		more flags for those drains, as one string, e.g. "--prefetch 2000"
		(claims of about 1,000 jobs, the loops' batch)
	--insert-chunk N
		jobs per InsertMany call (default 10000)
	--loop-batch N
		jobs claimed per statement by the backend's own raw loops (the
		cte-*, min-* variants; default: --batch), so that each side runs
		at its best batch size
	--alter CLAUSES
		(MySQL) clauses of an ALTER TABLE applied to the raw loops' table
		once it is filled, e.g. "ADD KEY k (run_at)" or "DROP KEY
		spool_jobs_finalized": what one index costs, paired with a run
		without it
`+bench.PlotUsage+bench.CommonUsage, "\n")
}
