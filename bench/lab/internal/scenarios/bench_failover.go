package scenarios

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func init() {
	registerBenchScenario("failover", "kill -9 the primary of a pg_auto_failover formation while jobs are inserted and worked; lost jobs, duplicate effects, write outage",
		func(m *cli.Env) cli.Command { return &BenchFailoverCommand{m: m} })
}

// BenchFailoverCommand runs the chaos suite's workers and checks against a
// pg_auto_failover formation of its own (a monitor, a primary and a
// synchronous standby) and, as the only fault, kills the primary's whole
// node, repeatedly; clients hold a URL naming both nodes with
// target_session_attrs=read-write.
type BenchFailoverCommand struct{ m *cli.Env }

// failoverResult is the outcome of lab failover, as printed with --json.
type failoverResult struct {
	Scenario string `json:"scenario"`
	Timeouts string `json:"timeouts"`
	// Failovers is how many times the primary was lost.
	Failovers int `json:"failovers"`
	// Acknowledged counts jobs whose insert returned success; Lost those of
	// them missing or not finished at the end.
	Acknowledged int64 `json:"acknowledged"`
	Lost         int64 `json:"lost"`
	// DuplicateEffects counts effects (rows written by CompleteTx in the
	// completing transaction) found more than once for one job.
	DuplicateEffects int64 `json:"duplicate_effects"`
	// OutageS is the longest write outage: from a kill to the first insert
	// that succeeded after it. OutagesS lists each failover's.
	OutageS  float64    `json:"outage_s"`
	OutagesS []float64  `json:"outages_s"`
	OK       bool       `json:"ok"`
	Chaos    chaosRound `json:"chaos"`
}

// Run implements cli.Command.
func (c *BenchFailoverCommand) Run(ctx context.Context, args []string) error {
	const name = "failover"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	failovers := fs.Int("failovers", 2, "times the primary's node is killed")
	duration := fs.Duration("duration", time.Minute, "how long jobs are inserted and failovers happen")
	timeouts := fs.String("timeouts", "fast", "pg_auto_failover's timeouts: fast (about 10 s to promote) or default (its own, about 50 s)")
	load := addChaosLoadFlags(fs, chaosLoadDefaults{jobs: 20000, workers: 3, concurrency: 8,
		work: 20 * time.Millisecond, lease: 5 * time.Second, drain: 3 * time.Minute})
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	var t dbserver.FailoverTimeouts
	switch *timeouts {
	case "fast":
		t = dbserver.FastFailoverTimeouts
	case "default":
		t = dbserver.DefaultFailoverTimeouts
	}
	switch {
	case len(pos) > 0:
		return cli.Usagef(name, "unexpected argument %q", pos[0])
	case *timeouts != "fast" && *timeouts != "default":
		return cli.Usagef(name, "--timeouts must be fast or default")
	case *failovers < 1 || *failovers > 20:
		return cli.Usagef(name, "--failovers must be between 1 and 20")
	case *duration < 20*time.Second || *duration > 2*time.Hour:
		return cli.Usagef(name, "--duration must be between 20s and 2h")
	}
	if err := load.check(name); err != nil {
		return err
	}
	ctx, cancel := load.withTimeout(ctx, name)
	defer cancel()
	o := load.options(c.m, *duration, 1)
	o.failover, o.failovers = &t, *failovers
	round, err := runChaosRound(ctx, o, "postgres")
	if err != nil {
		return bench.WithCause(ctx, fmt.Errorf("%s: %w", name, err))
	}
	res := failoverResult{Scenario: "failover", Timeouts: *timeouts, Failovers: round.Faults["restart_failover"],
		Acknowledged: round.Enqueued, Lost: round.Lost, DuplicateEffects: round.DuplicateEffects,
		OutagesS: round.WriteOutagesS, OK: round.OK, Chaos: *round}
	if len(res.OutagesS) > 0 {
		res.OutageS = slices.Max(res.OutagesS)
		if slices.Min(res.OutagesS) < 0 {
			res.OK, res.Chaos.OK = false, false
			res.Chaos.Violations = append(res.Chaos.Violations, "no_write_after_failover")
		}
	}
	if *load.asJSON {
		err = cli.WriteJSON(c.m.Stdout, res)
	} else {
		err = printFailover(c.m.Stdout, &res)
	}
	if err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%s: invariants violated: %s", name, strings.Join(res.Chaos.Violations, ", "))
	}
	return nil
}

// printFailover prints the summary and then the chaos round's tables.
func printFailover(w io.Writer, r *failoverResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "failovers\tacknowledged\tlost\tduplicate effects\twrite outage s (each)\t\n")
	each := make([]string, len(r.OutagesS))
	for i, o := range r.OutagesS {
		each[i] = fmt.Sprintf("%.1f", o)
	}
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f (%s)\t\n", r.Failovers, r.Acknowledged, r.Lost, r.DuplicateEffects, r.OutageS, strings.Join(each, " "))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "pg_auto_failover timeouts: %s\n\n", r.Timeouts)
	return printChaos(w, &chaosResult{Scenario: "chaos", Rounds: []chaosRound{r.Chaos}, OK: r.OK})
}

// Usage implements cli.Command.
func (c *BenchFailoverCommand) Usage() string {
	return `Usage: lab failover [flags]

Starts a pg_auto_failover formation of its own under a temporary directory
(a monitor, a primary and a synchronous standby on loopback ports; needs
Debian's pg-auto-failover-cli and postgresql-15-auto-failover), runs the
chaos suite's worker processes and producer against it with a URL naming
both nodes and target_session_attrs=read-write, and kills the primary's
whole node (pg_autoctl, its keeper and PostgreSQL, with SIGKILL) --failovers
times. The killed node is started again and rejoins as the standby before
the next failover. Every handler start and committed completion is audited
as in lab chaos; a third of the jobs complete with CompleteTx, writing an
effect row in the completing transaction. An insert is tried every 100 ms
to measure the write outage each failover causes.

Reports acknowledged jobs, lost ones, duplicate effects and the longest
write outage (outage_s), with the chaos suite's invariants. Exits non-zero
if any invariant failed.

	--failovers N
		times the primary's node is killed (default 2)
	--duration DURATION
		how long jobs are inserted and failovers happen (default 1m)
	--jobs N
		jobs inserted over the duration (default 20000)
	--workers N
		worker processes (default 3)
	--concurrency N
		workers per process (default 8)
	--work DURATION
		mean handler time (default 20ms)
	--lease DURATION
		LeaseDuration of the workers (default 5s)
	--timeouts fast|default
		pg_auto_failover's timeouts: fast (health checks every 1 s, a node
		unhealthy after 3 s, primary demote timeout 5 s, network partition
		timeout 3 s) or default (its own: 5 s, 20 s, 30 s, 20 s)
	--drain-timeout DURATION
		how long the queue may take to drain after the faults (default 3m)
	--json
		print only a JSON object on stdout
	--quiet
		no progress on stderr
	--timeout DURATION
		give up after this long (default 0: no limit)
	--keep-dir
		keep the temporary directory (audit and server logs)
`
}
