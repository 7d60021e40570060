package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("insert", "insert rate by method (InsertMany, InsertManyFast, Insert) and batch size",
		func(m *cli.Env) cli.Command { return &BenchInsertCommand{m: m} })
}

// BenchInsertCommand measures insert throughput for each insert method and
// batch size, each on a fresh store.
type BenchInsertCommand struct{ m *cli.Env }

// Insert methods, as named by --methods.
const (
	insertMethodMany   = "many"
	insertMethodFast   = "fast"
	insertMethodSingle = "single"
)

// insertMethodNames maps --methods names to the API they measure.
var insertMethodNames = map[string]string{
	insertMethodMany:   "InsertMany",
	insertMethodFast:   "InsertManyFast",
	insertMethodSingle: "Insert",
}

// insertCell is one method and batch size.
type insertCell struct {
	Method string `json:"method"` // API name
	Batch  int    `json:"batch"`  // jobs per call
	Jobs   int    `json:"jobs"`
	// JobsPerS is the median over rounds.
	JobsPerS float64   `json:"jobs_per_s"`
	Runs     []float64 `json:"runs_jobs_per_s"`
	// Call latency over every call of every round.
	Call  LatencyStats `json:"call_latency"`
	calls []time.Duration
	flag  string
}

// insertResult is the outcome of bench insert, as printed with --json.
type insertResult struct {
	Scenario   string       `json:"scenario"`
	Backend    string       `json:"backend"`
	Rounds     int          `json:"rounds"`
	Cells      []insertCell `json:"cells"`
	Stores     []string     `json:"stores"` // the scratch stores used, in order
	GOMAXPROCS int          `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchInsertCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench insert")
	jobs := r.Flags.Int("jobs", 100000, "jobs per bulk measurement")
	single := r.Flags.Int("single-jobs", 5000, "jobs for the one-per-call Insert measurement")
	batchList := r.Flags.String("batch-sizes", "100,1000,10000", "comma-separated jobs per bulk call")
	methodList := r.Flags.String("methods", "many,fast,single", "comma-separated methods: many, fast, single")
	rounds := r.Flags.Int("rounds", 1, "rounds; the cells alternate within each")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	batches, err := ParseCountList(*batchList)
	if err != nil {
		return cli.Usagef(r.Name, "--batch-sizes: %v", err)
	}
	var methods []string
	for _, m := range strings.Split(*methodList, ",") {
		m = strings.TrimSpace(m)
		if _, ok := insertMethodNames[m]; !ok {
			return cli.Usagef(r.Name, "--methods: unknown method %q (want many, fast or single)", m)
		}
		if !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	checks := []Check{
		Want(*jobs >= 1, "--jobs must be at least 1"),
		Want(*single >= 1, "--single-jobs must be at least 1"),
		Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"),
	}
	for _, b := range batches {
		checks = append(checks, Want(b <= 100000, "--batch-sizes: %d is over 100000", b))
	}
	if err := r.Check(checks...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	if err := r.StartProfile(); err != nil {
		return err
	}

	var cells []insertCell
	for _, m := range methods {
		if m == insertMethodSingle {
			cells = append(cells, insertCell{Method: insertMethodNames[m], Batch: 1, Jobs: *single, flag: m})
			continue
		}
		for _, b := range batches {
			cells = append(cells, insertCell{Method: insertMethodNames[m], Batch: int(b), Jobs: *jobs, flag: m})
		}
	}
	res := insertResult{Scenario: "insert", Rounds: *rounds, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for range *rounds {
		for i := range cells {
			cell := &cells[i]
			jps, calls, be, storeName, err := runInsertCell(ctx, r, cell)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench insert: %s × %d: %w", cell.Method, cell.Batch, err))
			}
			res.Backend = be
			res.Stores = append(res.Stores, storeName)
			cell.Runs = append(cell.Runs, jps)
			cell.calls = append(cell.calls, calls...)
		}
	}
	for i := range cells {
		cells[i].JobsPerS = Median(cells[i].Runs)
		cells[i].Call = Summarize(cells[i].calls)
	}
	res.Cells = cells
	return r.Finish(res, func(w io.Writer) error { return printInsertResult(w, &res) },
		func() *plot.Figure { return insertFigure(&res) })
}

// runCell inserts a cell's jobs into a fresh store and checks they are all
// there.
func runInsertCell(ctx context.Context, r *ScenarioRun, cell *insertCell) (jobsPerS float64, calls []time.Duration, backendName, storeName string, err error) {
	store, closeStore, err := r.OpenStoreFor(ctx)
	if err != nil {
		return 0, nil, "", "", err
	}
	defer func() {
		if cerr := closeStore(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	backendName, storeName = store.Backend.Name(), store.Scratch.Name
	client, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
	if err != nil {
		return 0, nil, "", "", err
	}
	params := repeatParams(Noop{}, &spool.InsertOpts{}, cell.Batch)
	var inserted atomic.Int64
	label := cell.flag
	if cell.flag != insertMethodSingle {
		label += "×" + strconv.Itoa(cell.Batch)
	}
	bar := r.Progress(label, "jobs", int64(cell.Jobs), inserted.Load)
	calls = make([]time.Duration, 0, cell.Jobs/cell.Batch+1)
	start := time.Now()
	err = insertChunks(ctx, int64(cell.Jobs), cell.Batch, &inserted, func(n int) error {
		begin := time.Now()
		var err error
		switch cell.flag {
		case insertMethodMany:
			_, err = client.InsertMany(ctx, params[:n])
		case insertMethodFast:
			_, err = client.InsertManyFast(ctx, params[:n])
		default:
			_, err = client.Insert(ctx, Noop{}, nil)
		}
		calls = append(calls, time.Since(begin))
		return err
	})
	elapsed := time.Since(start)
	bar.Stop()
	if err != nil {
		return 0, nil, "", "", err
	}
	stats, err := QueueStats(ctx, client, spool.DefaultQueue)
	if err != nil {
		return 0, nil, "", "", fmt.Errorf("check results: %w", err)
	}
	if got := stats.Counts[backend.StateAvailable]; got != int64(cell.Jobs) {
		return 0, nil, "", "", fmt.Errorf("inserted %d jobs but the queue holds %s", cell.Jobs, FormatCounts(stats))
	}
	return cli.Rate(int64(cell.Jobs), elapsed), calls, backendName, storeName, nil
}

// insertFigure draws the medians as bars.
func insertFigure(r *insertResult) *plot.Figure {
	var bars []plot.Bar
	for _, c := range r.Cells {
		label := c.Method
		if c.Batch > 1 {
			label += " ×" + cli.HumanInt(float64(c.Batch))
		}
		bars = append(bars, plot.Bar{Label: label, Value: c.JobsPerS})
	}
	return &plot.Figure{
		Title: fmt.Sprintf("insert: jobs per second by method and batch size (%s)", r.Backend),
		Charts: []*plot.Chart{{
			Title: fmt.Sprintf("Median of %d round(s)", r.Rounds), YLabel: "jobs/s", Bars: bars,
		}},
	}
}

// printInsertResult prints one row per cell.
func printInsertResult(w io.Writer, r *insertResult) error {
	fmt.Fprintf(w, "insert: %d round(s), %s\n\n", r.Rounds, r.Backend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tJOBS/CALL\tJOBS\tJOBS/S\tRUNS\tCALL P50\tCALL P99")
	for _, c := range r.Cells {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", c.Method, c.Batch, c.Jobs, cli.HumanInt(c.JobsPerS),
			FormatRuns(c.Runs), fmtMS(c.Call.P50), fmtMS(c.Call.P99))
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchInsertCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench insert [flags]

Measures insert throughput from one goroutine, for each method and batch
size, each on a fresh scratch store (so no measurement inserts into a table
another one filled):
	many    InsertMany: returns the ids (PostgreSQL: INSERT … SELECT FROM unnest)
	fast    InsertManyFast: returns a count only (PostgreSQL: COPY from 500
	        jobs per call, below that as InsertMany)
	single  Insert, one job per call and transaction
Every cell checks that the queue then holds exactly its jobs. Prints jobs/s
(median over --rounds, cells alternating within each round) and the
latency of the calls.

Flags:

	--jobs N
		jobs per bulk measurement (default 100000)
	--single-jobs N
		jobs for the one-per-call Insert measurement (default 5000)
	--batch-sizes LIST
		comma-separated jobs per bulk call (default 100,1000,10000)
	--methods LIST
		comma-separated methods (default many,fast,single)
	--rounds N
		rounds (default 1)
`+PlotUsage+CommonUsage, "\n")
}
