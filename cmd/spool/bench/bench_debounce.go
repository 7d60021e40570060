package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("debounce", "debounced inserts against plain unique inserts of the same keys, paired rounds",
		func(m *cli.Env) cli.Command { return &BenchDebounceCommand{m: m} })
}

// BenchDebounceCommand measures what a debounced insert costs beside a
// plain unique insert: goroutines insert keys drawn from a set, each
// insert one call and transaction, the two kinds in alternating rounds.
type BenchDebounceCommand struct{ m *cli.Env }

// debounceMode is one kind of insert's measurement.
type debounceMode struct {
	Mode     string    `json:"mode"`
	JobsPerS float64   `json:"inserts_per_s"`
	Runs     []float64 `json:"runs_inserts_per_s"`
	Ratio    float64   `json:"ratio_to_unique,omitempty"`
}

// debounceResult is the outcome of bench debounce, as printed with --json.
type debounceResult struct {
	Scenario   string         `json:"scenario"`
	Store      string         `json:"store"`
	Clients    int            `json:"clients"`
	Keys       int            `json:"keys"`
	Duration   string         `json:"duration"`
	Rounds     int            `json:"rounds"`
	Modes      []debounceMode `json:"modes"`
	GOMAXPROCS int            `json:"gomaxprocs"`
}

// Run implements cli.Command.
func (c *BenchDebounceCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench debounce")
	clients := r.Flags.Int("clients", 8, "goroutines inserting at once")
	keys := r.Flags.Int("keys", 100, "distinct keys the inserts draw from")
	duration := r.Flags.Duration("duration", 3*time.Second, "how long each kind inserts in each round")
	rounds := r.Flags.Int("rounds", 3, "rounds; the kinds alternate, each round starting with the other")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*clients >= 1 && *clients <= 1000, "--clients must be between 1 and 1000"),
		Want(*keys >= 1, "--keys must be at least 1"),
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
	client, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
	if err != nil {
		return err
	}
	if err := r.StartProfile(); err != nil {
		return err
	}
	// Keys of the two kinds differ (a prefix), so each mode meets only its
	// own jobs: after the first round every insert meets a pending job,
	// the steady state of both.
	optsFor := map[string]func(k int) *spool.InsertOpts{
		"unique": func(k int) *spool.InsertOpts {
			return &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "u" + strconv.Itoa(k)}}
		},
		"debounce": func(k int) *spool.InsertOpts {
			return &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "d" + strconv.Itoa(k),
				Debounce: &spool.DebounceOpts{Window: time.Hour, MaxWait: 2 * time.Hour}}}
		},
	}
	modes := []string{"unique", "debounce"}
	res := debounceResult{Scenario: "debounce", Store: store.Scratch.Name, Clients: *clients, Keys: *keys,
		Duration: duration.String(), Rounds: *rounds, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	runs := map[string][]float64{}
	for round := range *rounds {
		for k := range modes {
			m := modes[(k+round)%len(modes)]
			rate, err := insertKeysFor(ctx, client, *clients, *keys, *duration, optsFor[m])
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench debounce: %s: %w", m, err))
			}
			runs[m] = append(runs[m], rate)
			fmt.Fprintf(r.Env.Stderr, "debounce: round %d, %s: %s inserts/s\n", round+1, m, cli.HumanInt(rate))
		}
	}
	base := Median(runs["unique"])
	for _, m := range modes {
		dm := debounceMode{Mode: m, Runs: runs[m], JobsPerS: Median(runs[m])}
		if base > 0 {
			dm.Ratio = dm.JobsPerS / base
		}
		res.Modes = append(res.Modes, dm)
	}
	return r.Finish(res, func(w io.Writer) error { return printDebounceResult(w, &res) }, func() *plot.Figure { return nil })
}

// insertKeysFor has clients goroutines insert jobs with keys drawn in turn
// from keys until d has passed, and returns the inserts per second.
func insertKeysFor(ctx context.Context, c *spool.Client, clients, keys int, d time.Duration, opts func(int) *spool.InsertOpts) (float64, error) {
	var (
		n       atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	start := time.Now()
	end := start.Add(d)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; time.Now().Before(end) && ctx.Err() == nil; i += clients {
				if _, err := c.Insert(ctx, Noop{}, opts(i%keys)); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return cli.Rate(n.Load(), time.Since(start)), ctx.Err()
}

// printDebounceResult prints one row per kind of insert.
func printDebounceResult(w io.Writer, r *debounceResult) error {
	fmt.Fprintf(w, "debounce: %d clients inserting keys of %d, one job per call, %s per kind, %d round(s)\n\n",
		r.Clients, r.Keys, r.Duration, r.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSERT\tINSERTS/S\t× UNIQUE\tRUNS")
	for _, m := range r.Modes {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\n", m.Mode, cli.HumanInt(m.JobsPerS), m.Ratio, FormatRuns(m.Runs))
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchDebounceCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench debounce [flags]

Measures what a debounced insert costs beside a plain unique one:
--clients goroutines call Insert for --duration, each insert one call
and transaction with a key drawn in turn from --keys keys, plain unique
keys (UniqueOpts.Key) and debounced ones (Debounce with a 1h window, so
that every insert after a key's first moves its pending job), alternating
over --rounds. Prints each kind's inserts per second (median of rounds)
and its ratio to the plain unique inserts.

Flags:

	--clients N
		goroutines inserting at once (default 8)
	--keys N
		distinct keys (default 100)
	--duration DURATION
		how long each kind inserts in each round (default 3s)
	--rounds N
		rounds (default 3)
`+CommonUsage, "\n")
}
