package bench

import (
	"context"
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
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("workflow", "drain workflows: a fan-out and fan-in DAG, or a chain's per-step latency",
		func(m *cli.Env) cli.Command { return &BenchWorkflowCommand{m: m} })
}

// BenchWorkflowCommand drains workflows of no-op tasks: --shape dag inserts
// --workflows workflows of one root, --width tasks after it and one task
// after them all, then times one client working every task (compare with
// bench drain of as many jobs); --shape chain inserts one workflow of
// --tasks tasks each after the one before, and reports the latency of each
// step, from a task's completion to its dependent's start, by the
// database's clock.
type BenchWorkflowCommand struct{ m *cli.Env }

// workflowResult is the outcome of bench workflow, as printed with --json.
type workflowResult struct {
	Scenario       string  `json:"scenario"`
	Shape          string  `json:"shape"`
	Backend        string  `json:"backend"`
	Store          string  `json:"store"`
	Workflows      int     `json:"workflows"`
	Width          int     `json:"width,omitempty"`
	Tasks          int     `json:"tasks"`
	Seconds        float64 `json:"seconds"`
	TasksPerS      float64 `json:"tasks_per_s"`
	InsertSeconds  float64 `json:"insert_seconds"`
	InsertTasksPS  float64 `json:"insert_tasks_per_s"`
	StepP50MS      float64 `json:"step_p50_ms,omitempty"`
	StepP99MS      float64 `json:"step_p99_ms,omitempty"`
	StepMaxMS      float64 `json:"step_max_ms,omitempty"`
	Workers        int     `json:"workers"`
	Prefetch       int     `json:"prefetch"`
	Batch          int     `json:"batch"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
	ClientCPUPerUS float64 `json:"client_cpu_per_task_us,omitempty"`
	ServerCPUPerUS float64 `json:"server_cpu_per_task_us,omitempty"`
}

// Run implements cli.Command.
func (c *BenchWorkflowCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench workflow")
	shape := r.Flags.String("shape", "dag", "dag (fan-out then fan-in) or chain")
	workflows := r.Flags.Int("workflows", 1000, "dag: number of workflows")
	width := r.Flags.Int("width", 100, "dag: tasks between each workflow's root and its last task")
	tasks := r.Flags.Int("tasks", 10000, "chain: number of tasks")
	inserters := r.Flags.Int("inserters", 4, "dag: workflows inserted at once")
	q := r.AddQueueFlags(drainPrefetch)
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(append([]Check{
		Want(*shape == "dag" || *shape == "chain", "--shape must be dag or chain"),
		Want(*workflows >= 1, "--workflows must be at least 1"),
		Want(*width >= 1 && *width+2 <= spool.MaxWorkflowTasks, "--width must be between 1 and %d", spool.MaxWorkflowTasks-2),
		Want(*tasks >= 2 && *tasks <= spool.MaxWorkflowTasks, "--tasks must be between 2 and %d", spool.MaxWorkflowTasks),
		Want(*inserters >= 1, "--inserters must be at least 1"),
	}, q.Checks()...)...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	var wfs []*spool.Workflow
	total := 0
	if *shape == "dag" {
		for i := range *workflows {
			w := spool.NewWorkflow("bench-dag-" + strconv.Itoa(i))
			w.Add("root", Noop{}, nil)
			ends := make([]spool.Dep, *width)
			for k := range *width {
				name := "t" + strconv.Itoa(k)
				w.Add(name, Noop{}, nil, spool.After("root"))
				ends[k] = spool.After(name)
			}
			w.Add("end", Noop{}, nil, ends...)
			wfs = append(wfs, w)
			total += w.Len()
		}
	} else {
		w := spool.NewWorkflow("bench-chain")
		w.Add("t0", Noop{}, nil)
		for k := 1; k < *tasks; k++ {
			w.Add("t"+strconv.Itoa(k), Noop{}, nil, spool.After("t"+strconv.Itoa(k-1)))
		}
		wfs, total = append(wfs, w), *tasks
	}
	be, counter := CountCompletions(store.Backend, int64(total))
	client, handled, err := q.NoopClient(be, r)
	if err != nil {
		return err
	}

	var inserted atomic.Int64
	bar := r.Progress("insert", "tasks", int64(total), inserted.Load)
	insertStart := time.Now()
	var ids []int64
	err = insertWorkflows(ctx, client, wfs, *inserters, &inserted, &ids)
	insertTime := time.Since(insertStart)
	bar.Stop()
	if err != nil {
		return WithCause(ctx, err)
	}

	if err := r.StartProfile(); err != nil {
		return err
	}
	cpu := startCPUSpan(func() []int { return store.sessionPIDs(ctx) })
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("bench workflow: %w", err)
	}
	r.stopAtEnd(client)
	bar = r.Progress("drain", "tasks", int64(total), counter.Written)
	sampler := startCounterSampler(counter.Written, 100*time.Millisecond)
	err = waitDrained(ctx, client, counter, handled)
	samples := sampler.Stop()
	bar.Stop()
	if err != nil {
		return WithCause(ctx, err)
	}
	elapsed := counter.DoneAt.Sub(start)
	clientCPU, serverCPU, _ := cpu.perJob(total, store.Backend.Name())

	res := workflowResult{
		Scenario: "workflow", Shape: *shape, Backend: store.Backend.Name(), Store: store.Scratch.Name,
		Workflows: len(wfs), Tasks: total, Seconds: elapsed.Seconds(), TasksPerS: cli.Rate(int64(total), elapsed),
		InsertSeconds: insertTime.Seconds(), InsertTasksPS: cli.Rate(int64(total), insertTime),
		Workers: *q.Workers, Prefetch: *q.Prefetch, Batch: *q.Batch, GOMAXPROCS: runtime.GOMAXPROCS(0),
		ClientCPUPerUS: clientCPU, ServerCPUPerUS: serverCPU,
	}
	if *shape == "dag" {
		res.Width = *width
	}
	// Every task must have completed, none left waiting.
	for _, id := range ids {
		d, err := client.Workflow(ctx, id)
		if err != nil {
			return fmt.Errorf("bench workflow: check results: %w", err)
		}
		if d.Counts[backend.StateCompleted] != int64(d.Tasks) {
			return fmt.Errorf("bench workflow: workflow %d holds %v, want %d completed", id, d.Counts, d.Tasks)
		}
		if *shape == "chain" {
			steps := chainSteps(d)
			if len(steps) > 0 {
				res.StepP50MS, res.StepP99MS, res.StepMaxMS = msAt(steps, 0.50), msAt(steps, 0.99), msAt(steps, 1)
			}
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printWorkflowResult(w, &res) },
		func() *plot.Figure {
			dr := drainResult{Scenario: "workflow " + *shape, Backend: res.Backend, Jobs: total, Seconds: res.Seconds, JobsPerS: res.TasksPerS}
			return drainFigure(&dr, samples)
		})
}

// insertWorkflows inserts wfs, inserters at a time, and appends their ids.
func insertWorkflows(ctx context.Context, client *spool.Client, wfs []*spool.Workflow, inserters int, inserted *atomic.Int64, ids *[]int64) error {
	var (
		mu    sync.Mutex
		first error
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range min(inserters, len(wfs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(wfs) {
					return
				}
				res, err := client.InsertWorkflow(ctx, wfs[i])
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					*ids = append(*ids, res.ID)
				}
				mu.Unlock()
				if err != nil {
					return
				}
				inserted.Add(int64(wfs[i].Len()))
			}
		}()
	}
	wg.Wait()
	return first
}

// heldQueue is the queue of the roots of waitingWorkflows, which no bench
// client works.
const heldQueue = "bench-held"

// waitingWorkflows returns workflows holding n tasks of the default queue
// that wait for a root in heldQueue: up to 100 tasks each.
func waitingWorkflows(n int) []*spool.Workflow {
	var wfs []*spool.Workflow
	for i := 0; n > 0; i++ {
		w := spool.NewWorkflow("bench-waiting-" + strconv.Itoa(i))
		w.Add("root", Noop{}, &spool.InsertOpts{Queue: heldQueue})
		for k := range min(n, 100) {
			w.Add("t"+strconv.Itoa(k), Noop{}, nil, spool.After("root"))
		}
		n -= min(n, 100)
		wfs = append(wfs, w)
	}
	return wfs
}

// chainSteps returns, for each task of a chain after the first, the time
// from its dependency's completion to its own start, sorted.
func chainSteps(d *spool.WorkflowDetail) []time.Duration {
	byID := make(map[int64]*spool.JobRow, len(d.Jobs))
	for _, j := range d.Jobs {
		byID[j.ID] = j
	}
	var out []time.Duration
	for _, e := range d.Edges {
		p, c := byID[e.Parent], byID[e.Child]
		if p == nil || c == nil || p.FinalizedAt == nil || c.AttemptedAt == nil {
			continue
		}
		out = append(out, c.AttemptedAt.Sub(*p.FinalizedAt))
	}
	slices.Sort(out)
	return out
}

// msAt is the q-quantile of sorted durations, in milliseconds.
func msAt(sorted []time.Duration, q float64) float64 {
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

func printWorkflowResult(w io.Writer, r *workflowResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"scenario", r.Scenario + " " + r.Shape},
		{"workflows", fmt.Sprint(r.Workflows)},
		{"tasks", fmt.Sprint(r.Tasks)},
		{"seconds", fmt.Sprintf("%.3f", r.Seconds)},
		{"tasks/s", cli.HumanInt(r.TasksPerS)},
		{"insert tasks/s", cli.HumanInt(r.InsertTasksPS)},
		{"client CPU per task", usText(r.ClientCPUPerUS)},
		{"server CPU per task", usText(r.ServerCPUPerUS)},
	}
	if r.Shape == "chain" {
		rows = append(rows, [2]string{"step p50", fmt.Sprintf("%.2f ms", r.StepP50MS)},
			[2]string{"step p99", fmt.Sprintf("%.2f ms", r.StepP99MS)}, [2]string{"step max", fmt.Sprintf("%.2f ms", r.StepMaxMS)})
	}
	rows = append(rows, [2]string{"workers", fmt.Sprint(r.Workers)}, [2]string{"prefetch", fmt.Sprint(r.Prefetch)},
		[2]string{"backend", r.Backend}, [2]string{"store", r.Store})
	for _, row := range rows {
		if row[1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchWorkflowCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench workflow [--shape dag|chain] [flags]

Creates a scratch schema and drains workflows of no-op tasks with one client.

--shape dag (default) inserts --workflows workflows, each a root task,
--width tasks after it and one task after them all (1,000 x 102 tasks by
default), and times the drain from Start until every completion is written:
compare it with bench drain --jobs of as many jobs, run alternately.

--shape chain inserts one workflow of --tasks tasks, each after the one
before, and reports each step's latency, from a task's completion to the
start of the task after it (both times by the database's clock): p50, p99
and the largest.

Flags:

	--shape dag|chain
	--workflows N     dag: workflows (default 1000)
	--width N         dag: tasks between root and end (default 100)
	--tasks N         chain: tasks (default 10000)
	--inserters N     dag: workflows inserted at once (default 4)
	--workers N, --prefetch N, --batch N, --completion-delay D
		as bench drain
`+PlotUsage+CommonUsage, "\n")
}
