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
	registerScenario("await", "Client.Await latency from a job's completion, in the client that ran it and in another handle",
		func(m *cli.Env) cli.Command { return &BenchAwaitCommand{m: m} })
}

// BenchAwaitCommand measures how long after a job's completion Await
// returns it: in the worker's own client (woken by its outcome) and in a
// client on another handle of the store, as another process would be.
type BenchAwaitCommand struct{ m *cli.Env }

// AwaitJob sleeps SleepUS microseconds in its handler, so that completions fall at
// random points of the awaiter's read period.
type AwaitJob struct {
	SleepUS int `json:"sleep_us"`
}

// Kind implements spool.JobArgs.
func (AwaitJob) Kind() string { return "spool_bench_await" }

// awaitSide is the latency of one awaiting client.
type awaitSide struct {
	Side    string       `json:"side"`
	Latency LatencyStats `json:"latency_ms"`
}

// awaitResult is the outcome of bench await, as printed with --json.
type awaitResult struct {
	Scenario   string      `json:"scenario"`
	Store      string      `json:"store"`
	Jobs       int         `json:"jobs_per_side"`
	InFlight   int         `json:"in_flight"`
	AwaitPoll  string      `json:"await_poll"`
	Announce   bool        `json:"announce_finishes"`
	Sides      []awaitSide `json:"sides"`
	GOMAXPROCS int         `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchAwaitCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench await")
	jobs := r.Flags.Int("jobs", 300, "jobs awaited by each side")
	inFlight := r.Flags.Int("in-flight", 10, "jobs awaited at once")
	poll := r.Flags.Duration("await-poll", 50*time.Millisecond, "Config.AwaitPoll of the awaiting clients")
	maxSleep := r.Flags.Duration("max-sleep", 20*time.Millisecond, "each handler sleeps a random time up to this")
	announce := r.Flags.Bool("announce", false, "Config.AnnounceFinishes on the worker (PostgreSQL: a NOTIFY per batch of outcomes)")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*jobs >= 1 && *jobs <= 1_000_000, "--jobs must be between 1 and 1000000"),
		Want(*inFlight >= 1 && *inFlight <= 1000, "--in-flight must be between 1 and 1000"),
		Want(*poll >= time.Millisecond, "--await-poll must be at least 1ms"),
		Want(*maxSleep >= 0, "--max-sleep must not be negative"),
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
		return fmt.Errorf("bench await: open a second handle: %w", err)
	}
	r.AtEnd(func() { _ = other.Close() })
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[AwaitJob]) error {
		if j.Args.SleepUS > 0 {
			time.Sleep(time.Duration(j.Args.SleepUS) * time.Microsecond)
		}
		return nil
	}))
	worker, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger(), Workers: ws, AwaitPoll: *poll, AnnounceFinishes: *announce,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *inFlight}}})
	if err != nil {
		return err
	}
	// The completion times, by the worker's clock as its outcomes are
	// applied (the same clock as the awaiters': one process).
	var mu sync.Mutex
	completed := map[int64]time.Time{}
	events, stopEvents := worker.Subscribe(spool.EventJobCompleted)
	go func() {
		for e := range events {
			mu.Lock()
			completed[e.JobID] = e.At
			mu.Unlock()
		}
	}()
	defer stopEvents()
	if err := worker.Start(ctx); err != nil {
		return err
	}
	r.stopAtEnd(worker)
	remote, err := spool.NewClient(other, &spool.Config{Logger: r.Logger(), AwaitPoll: *poll, AllowUnknownKinds: true})
	if err != nil {
		return err
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	res := awaitResult{Scenario: "await", Store: store.Scratch.Name, Jobs: *jobs, InFlight: *inFlight,
		AwaitPoll: poll.String(), Announce: *announce, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for _, side := range []struct {
		name string
		c    *spool.Client
	}{{"same client", worker}, {"other handle", remote}} {
		lat, err := awaitMany(ctx, side.c, *jobs, *inFlight, *maxSleep, func(id int64) (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			at, ok := completed[id]
			return at, ok
		})
		if err != nil {
			return WithCause(ctx, fmt.Errorf("bench await: %s: %w", side.name, err))
		}
		s := Summarize(lat)
		res.Sides = append(res.Sides, awaitSide{Side: side.name, Latency: s})
		fmt.Fprintf(r.Env.Stderr, "await: %s: p50 %s, p99 %s\n", side.name, fmtMS(s.P50), fmtMS(s.P99))
	}
	return r.Finish(res, func(w io.Writer) error { return printAwaitResult(w, &res) }, func() *plot.Figure { return nil })
}

// awaitMany inserts jobs through c, inFlight at a time, awaits each through
// c and returns, for each, how long after its completion Await returned.
func awaitMany(ctx context.Context, c *spool.Client, jobs, inFlight int, maxSleep time.Duration, completedAt func(int64) (time.Time, bool)) ([]time.Duration, error) {
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, jobs)
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, inFlight)
	)
	for range jobs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		sleep := 0
		if maxSleep > 0 {
			sleep = int(rand.Int64N(maxSleep.Microseconds() + 1))
		}
		res, err := c.Insert(ctx, AwaitJob{SleepUS: sleep}, nil)
		if err != nil {
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			j, err := c.Await(ctx, res.ID)
			returned := time.Now()
			if err == nil && j.State != backend.StateCompleted {
				err = fmt.Errorf("job %d is %s", res.ID, j.State)
			}
			var at time.Time
			if err == nil {
				// The worker's event may come just after Await saw the row.
				deadline := time.Now().Add(5 * time.Second)
				for {
					var ok bool
					if at, ok = completedAt(res.ID); ok || time.Now().After(deadline) {
						if !ok {
							err = fmt.Errorf("job %d: no completion event", res.ID)
						}
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			lat = append(lat, max(returned.Sub(at), 0))
		}()
	}
	wg.Wait()
	return lat, first
}

// printAwaitResult prints one row per side.
func printAwaitResult(w io.Writer, r *awaitResult) error {
	fmt.Fprintf(w, "await: %d jobs per side, %d awaited at once, AwaitPoll %s, AnnounceFinishes %v; latency from the completion's event to Await's return\n\n",
		r.Jobs, r.InFlight, r.AwaitPoll, r.Announce)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AWAITER\tP50\tP99\tMAX")
	for _, s := range r.Sides {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Side, fmtMS(s.Latency.P50), fmtMS(s.Latency.P99), fmtMS(s.Latency.Max))
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchAwaitCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench await [flags]

Measures how long after a job completes Client.Await returns it. A worker
client runs jobs that sleep a random time up to --max-sleep; --jobs jobs
are inserted and awaited, --in-flight at a time, first by the worker's own
client (woken by its own outcome) and then by a client on a second handle
of the store (as another process would be: woken by the store). The
latency is from the worker's completion event (its outcome applied) to
Await's return, on one clock. Prints p50, p99 and max for each side.

Flags:

	--jobs N
		jobs awaited by each side (default 300)
	--in-flight N
		jobs awaited at once (default 10)
	--await-poll DURATION
		Config.AwaitPoll of the clients (default 50ms)
	--max-sleep DURATION
		the handlers' longest sleep (default 20ms)
	--announce
		set Config.AnnounceFinishes on the worker: on PostgreSQL it
		announces each batch of finished jobs by a NOTIFY that the other
		handle's Await hears
`+CommonUsage, "\n")
}
