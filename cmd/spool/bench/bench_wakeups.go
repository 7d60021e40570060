package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
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
	registerScenario("wakeups", "PostgreSQL: concurrent one-job inserts with wake-ups after commit, at commit (NOTIFY in the transaction) and off",
		func(m *cli.Env) cli.Command { return &BenchWakeupsCommand{m: m} })
}

// BenchWakeupsCommand measures what waking workers costs inserts: clients
// inserting one job per transaction, side by side in each wake-up mode of
// the PostgreSQL backend (spool_wake).
type BenchWakeupsCommand struct{ m *cli.Env }

// wakeupsMode is one wake-up mode's measurement.
type wakeupsMode struct {
	Mode string `json:"mode"`
	// JobsPerS is the median over rounds; Ratio its ratio to mode off.
	JobsPerS float64   `json:"jobs_per_s"`
	Runs     []float64 `json:"runs_jobs_per_s"`
	Ratio    float64   `json:"ratio_to_off,omitempty"`
}

// wakeupsResult is the outcome of bench wakeups, as printed with --json.
type wakeupsResult struct {
	Scenario string        `json:"scenario"`
	Store    string        `json:"store"`
	Clients  int           `json:"clients"`
	Duration string        `json:"duration"`
	Rounds   int           `json:"rounds"`
	Modes    []wakeupsMode `json:"modes"`
	Woken    int64         `json:"wake_ups_heard"`
	// Inserted is how many jobs every mode inserted in all; the store was
	// checked to hold exactly these.
	Inserted   int64 `json:"inserted"`
	GOMAXPROCS int   `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchWakeupsCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench wakeups")
	clients := r.Flags.Int("clients", 16, "goroutines inserting at once, each one job per call and transaction")
	duration := r.Flags.Duration("duration", 5*time.Second, "how long each mode inserts in each round")
	rounds := r.Flags.Int("rounds", 3, "rounds; the modes alternate, each round starting one mode later")
	modeList := r.Flags.String("modes", "after,commit,off", "comma-separated wake-up modes (spool_wake): after, commit, off")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	var modes []string
	for _, m := range strings.Split(*modeList, ",") {
		switch m = strings.TrimSpace(m); m {
		case "after", "commit", "off":
			modes = append(modes, m)
		default:
			return cli.Usagef(r.Name, "--modes: unknown mode %q (want after, commit or off)", m)
		}
	}
	if err := r.Check(
		Want(*clients >= 1 && *clients <= 1000, "--clients must be between 1 and 1000"),
		Want(*duration > 0, "--duration must be positive"),
		Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"),
	); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	if store.Backend.Name() != "postgres" {
		return fmt.Errorf("bench wakeups: wake-up modes are PostgreSQL's (spool_wake); %s has none", store.Backend.Name())
	}
	// A worker's subscription, open throughout: the notifications go to a
	// listener, as in production.
	var heard atomic.Int64
	listenCtx, stopListen := context.WithCancel(ctx)
	defer stopListen()
	n := store.Backend.(backend.Notifier)
	ready := make(chan struct{})
	go func() {
		_ = n.Listen(listenCtx, func() { close(ready) }, func(backend.Wake) { heard.Add(1) })
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		return WithCause(ctx, ctx.Err())
	}
	clientsByMode := map[string]*spool.Client{}
	for _, m := range modes {
		dsn, err := SetURLParam(store.Scratch.URL, postgres.WakeParam, m)
		if err != nil {
			return err
		}
		be, err := backend.Open(ctx, dsn)
		if err != nil {
			return fmt.Errorf("bench wakeups: open with spool_wake=%s: %w", m, err)
		}
		defer be.Close()
		if clientsByMode[m], err = spool.NewClient(be, &spool.Config{Logger: r.Logger()}); err != nil {
			return err
		}
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	res := wakeupsResult{Scenario: "wakeups", Store: store.Scratch.Name, Clients: *clients, Duration: duration.String(),
		Rounds: *rounds, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	runs := map[string][]float64{}
	for round := range *rounds {
		for k := range modes {
			m := modes[(k+round)%len(modes)]
			n, rate, err := insertFor(ctx, clientsByMode[m], *clients, *duration)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench wakeups: %s: %w", m, err))
			}
			res.Inserted += n
			runs[m] = append(runs[m], rate)
			fmt.Fprintf(r.Env.Stderr, "wakeups: round %d, %s: %s inserts/s\n", round+1, m, cli.HumanInt(rate))
		}
	}
	off := Median(runs["off"])
	for _, m := range modes {
		wm := wakeupsMode{Mode: m, Runs: runs[m], JobsPerS: Median(runs[m])}
		if off > 0 {
			wm.Ratio = wm.JobsPerS / off
		}
		res.Modes = append(res.Modes, wm)
	}
	res.Woken = heard.Load()
	stats, err := QueueStats(ctx, clientsByMode[modes[0]], spool.DefaultQueue)
	if err != nil {
		return fmt.Errorf("bench wakeups: check results: %w", err)
	}
	if got := stats.Counts[backend.StateAvailable]; got != res.Inserted {
		return fmt.Errorf("bench wakeups: inserted %d jobs but the queue holds %s", res.Inserted, FormatCounts(stats))
	}
	return r.Finish(res, func(w io.Writer) error { return printWakeupsResult(w, &res) }, func() *plot.Figure { return nil })
}

// insertFor has clients goroutines call Insert until d has passed and
// returns the jobs inserted and their rate per second.
func insertFor(ctx context.Context, c *spool.Client, clients int, d time.Duration) (int64, float64, error) {
	var (
		n       atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	start := time.Now()
	end := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				if _, err := c.Insert(ctx, Noop{}, nil); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, 0, first
	}
	return n.Load(), cli.Rate(n.Load(), time.Since(start)), ctx.Err()
}

// printWakeupsResult prints one row per mode.
func printWakeupsResult(w io.Writer, r *wakeupsResult) error {
	fmt.Fprintf(w, "wakeups: %d clients inserting one job per transaction, %s per mode, %d round(s); %d wake-ups heard\n\n",
		r.Clients, r.Duration, r.Rounds, r.Woken)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WAKE\tINSERTS/S\t× OFF\tRUNS")
	for _, m := range r.Modes {
		ratio := "-"
		if m.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", m.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Mode, cli.HumanInt(m.JobsPerS), ratio, FormatRuns(m.Runs))
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchWakeupsCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench wakeups [flags]

PostgreSQL only. Measures what waking workers costs inserts: --clients
goroutines call Insert (one job per call and transaction) for --duration
with each wake-up mode of the backend (the spool_wake URL parameter), the
modes alternating over --rounds, while a worker's LISTEN subscription is
open:

	after   the default: the waker announces committed jobs afterwards, in
	        a transaction of its own for every insert committed meanwhile
	commit  NOTIFY in the inserting transaction (PostgreSQL then commits
	        notifying transactions one at a time)
	off     no wake-up: workers would find the jobs by polling

Prints each mode's inserts per second (median of rounds) and its ratio to
off.

Flags:

	--clients N
		goroutines inserting at once (default 16)
	--duration DURATION
		how long each mode inserts in each round (default 5s)
	--rounds N
		rounds (default 3)
	--modes LIST
		comma-separated modes (default after,commit,off)
`+CommonUsage, "\n")
}
