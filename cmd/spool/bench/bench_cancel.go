package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("cancel", "JobCancel latency to the running handler, from the client that runs it and from another handle",
		func(m *cli.Env) cli.Command { return &BenchCancelCommand{m: m} })
}

// BenchCancelCommand measures how long after JobCancel returns the running
// job's handler sees its context cancelled: cancelled through the worker's
// own client, and through a client on another handle of the store, as
// another process would (where the cancellation's wake-up carries it).
type BenchCancelCommand struct{ m *cli.Env }

// CancelJob blocks in its handler until its context ends.
type CancelJob struct{}

// Kind implements spool.JobArgs.
func (CancelJob) Kind() string { return "spool_bench_cancel" }

// cancelSide is the latency seen through one cancelling client.
type cancelSide struct {
	Side    string       `json:"side"`
	Latency LatencyStats `json:"latency_ms"`
}

// cancelResult is the outcome of bench cancel, as printed with --json.
type cancelResult struct {
	Scenario   string       `json:"scenario"`
	Store      string       `json:"store"`
	Jobs       int          `json:"jobs_per_side"`
	Lease      string       `json:"lease"`
	MaxRun     string       `json:"max_run"`
	Sides      []cancelSide `json:"sides"`
	GOMAXPROCS int          `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchCancelCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench cancel")
	jobs := r.Flags.Int("jobs", 100, "jobs cancelled through each side")
	lease := r.Flags.Duration("lease", time.Minute, "Config.LeaseDuration of the worker (its heartbeats come every third of it)")
	maxRun := r.Flags.Duration("max-run", 250*time.Millisecond, "each job runs a random time up to this before it is cancelled")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*jobs >= 1 && *jobs <= 100_000, "--jobs must be between 1 and 100000"),
		Want(*lease >= 3*time.Second, "--lease must be at least 3s"),
		Want(*maxRun >= 0 && *maxRun <= time.Minute, "--max-run must be between 0 and 1m"),
	); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	other, err := backend.Open(ctx, store.Scratch.URL)
	if err != nil {
		return fmt.Errorf("bench cancel: open a second handle: %w", err)
	}
	r.AtEnd(func() { _ = other.Close() })
	started := make(chan int64)
	var mu sync.Mutex
	ended := map[int64]chan time.Time{}
	endedOf := func(id int64) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := ended[id]
		if !ok {
			ch = make(chan time.Time, 1)
			ended[id] = ch
		}
		return ch
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[CancelJob]) error {
		select {
		case started <- j.ID:
		case <-ctx.Done():
		}
		<-ctx.Done()
		endedOf(j.ID) <- time.Now()
		return context.Cause(ctx)
	}))
	worker, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger(), Workers: ws, LeaseDuration: *lease,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}})
	if err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	r.stopAtEnd(worker)
	remote, err := spool.NewClient(other, &spool.Config{Logger: r.Logger(), AllowUnknownKinds: true})
	if err != nil {
		return err
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	res := cancelResult{Scenario: "cancel", Store: store.Scratch.Name, Jobs: *jobs, Lease: lease.String(), MaxRun: maxRun.String(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	// A heartbeat (every third of the lease) also tells the handler: a
	// latency that long says the wake-up did not.
	beat := *lease / 3
	for _, side := range []struct {
		name string
		c    *spool.Client
	}{{"same client", worker}, {"other handle", remote}} {
		lat := make([]time.Duration, 0, *jobs)
		for range *jobs {
			ins, err := worker.Insert(ctx, CancelJob{}, nil)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench cancel: insert: %w", err))
			}
			select {
			case id := <-started:
				if id != ins.ID {
					return fmt.Errorf("bench cancel: job %d started, want %d", id, ins.ID)
				}
			case <-ctx.Done():
				return WithCause(ctx, fmt.Errorf("bench cancel: waiting for job %d to start: %w", ins.ID, ctx.Err()))
			}
			if *maxRun > 0 {
				// A random run: cancels at a fixed pace would fall at one
				// phase of a store's periodic reads (MariaDB's heads, every
				// 200 ms while jobs come) and show only that phase.
				time.Sleep(rand.N(*maxRun))
			}
			if _, err := side.c.JobCancel(ctx, ins.ID); err != nil {
				return WithCause(ctx, fmt.Errorf("bench cancel: %s: cancel job %d: %w", side.name, ins.ID, err))
			}
			returned := time.Now()
			select {
			case at := <-endedOf(ins.ID):
				lat = append(lat, max(at.Sub(returned), 0))
			case <-ctx.Done():
				return WithCause(ctx, fmt.Errorf("bench cancel: %s: job %d's handler not cancelled: %w", side.name, ins.ID, ctx.Err()))
			}
			mu.Lock()
			delete(ended, ins.ID)
			mu.Unlock()
			// The job's row is cancelled before the next: one running job at a time.
			if err := waitCancelled(ctx, worker, ins.ID); err != nil {
				return err
			}
		}
		s := Summarize(lat)
		res.Sides = append(res.Sides, cancelSide{Side: side.name, Latency: s})
		fmt.Fprintf(r.Env.Stderr, "cancel: %s: p50 %s, p99 %s, max %s (a heartbeat would have come within %s)\n",
			side.name, fmtMS(s.P50), fmtMS(s.P99), fmtMS(s.Max), beat)
	}
	return r.Finish(res, func(w io.Writer) error { return printCancelResult(w, &res) }, func() *plot.Figure { return nil })
}

// waitCancelled waits for job id's row to show it cancelled.
func waitCancelled(ctx context.Context, c *spool.Client, id int64) error {
	j, err := c.Await(ctx, id)
	if err != nil {
		return WithCause(ctx, fmt.Errorf("bench cancel: await job %d: %w", id, err))
	}
	if j.State != backend.StateCancelled {
		return fmt.Errorf("bench cancel: job %d is %s after its cancellation", id, j.State)
	}
	return nil
}

// printCancelResult prints one row per side.
func printCancelResult(w io.Writer, r *cancelResult) error {
	fmt.Fprintf(w, "cancel: %d jobs per side, each cancelled after a random run up to %s, lease %s; latency from JobCancel's return to the handler's context cancelled\n\n", r.Jobs, r.MaxRun, r.Lease)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CANCELLED THROUGH\tP50\tP99\tMAX")
	for _, s := range r.Sides {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Side, fmtMS(s.Latency.P50), fmtMS(s.Latency.P99), fmtMS(s.Latency.Max))
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchCancelCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench cancel [flags]

Measures how long after Client.JobCancel returns the cancelled job's
handler sees its context end. A worker client runs one job at a time,
whose handler blocks until its context ends; --jobs jobs are inserted and,
once each has run a random time up to --max-run, cancelled: first through
the worker's own client,
then through a client on a second handle of the store, as another process
would (the cancellation's wake-up carries it: a PostgreSQL notification,
SQLite's and MySQL's cancellation events). Heartbeats, which also tell a
handler its job is gone, come every third of --lease: a latency near that
says the wake-up did not reach the worker. Prints p50, p99 and max for each
side.

Flags:

	--jobs N
		jobs cancelled through each side (default 100)
	--max-run DURATION
		each job runs a random time up to this before it is cancelled
		(default 250ms), so that the cancels fall at every phase of a
		store's periodic reads
	--lease DURATION
		the worker's Config.LeaseDuration (default 1m)
`+CommonUsage, "\n")
}
