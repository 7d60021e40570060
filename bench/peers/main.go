// Command peers runs the same benchmark scenarios (drain, insert, steady)
// with Spool and its peers (River on PostgreSQL and SQLite, Graphile Worker
// with and without batching) in one run: each run on a fresh database of the
// same server, systems alternating, several repetitions, and prints medians
// and the ratio Spool/peer.
//
// It is a module of its own so that Spool never depends on its peers. Run it
// from its directory:
//
//	cd bench/peers && go run . --database-url postgres://…
//
// See README.md for the systems, their settings and the commands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// run is the command: 'run-one' (the runner side, used by the command
// itself) or an orchestrated benchmark.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "run-one" {
		return runOne(ctx, stdin, stdout)
	}
	opts, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "spool-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sqliteDir := opts.sqliteDir
	if sqliteDir == "" {
		sqliteDir = tmp
	}
	dir, err := filepath.Abs(opts.dir)
	if err != nil {
		return err
	}
	l := &launcher{dir: dir, tmp: tmp, stderr: stderr}
	maker := &storeMaker{pgURL: opts.pgURL, sqliteDir: sqliteDir, redisAddr: opts.redisAddr}
	progress := stderr
	if opts.quiet {
		progress = io.Discard
	}
	records := orchestrate(ctx, opts.config, l, maker, progress)
	rows := summarizeRuns(opts.config, records)
	if opts.asJSON {
		err = writeJSON(stdout, &report{
			Machine: machine(ctx, opts), Config: configJSON(opts.config), Runs: records, Summary: rows,
		})
	} else {
		err = printReport(stdout, opts.config, rows, records)
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var failed []string
	for _, r := range records {
		if r.Error != "" {
			failed = append(failed, strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Scenario, r.System, r.Method))+": "+r.Error)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d runs failed: %s", len(failed), len(records), strings.Join(failed, "; "))
	}
	return nil
}

// options are the parsed flags.
type options struct {
	*config
	pgURL     string
	redisAddr string
	sqliteDir string
	dir       string
	asJSON    bool
	quiet     bool
}

const usage = `Usage: go run . [flags]    (from bench/peers)

Runs drain, insert and steady with Spool and its peers, each run on a fresh
database (PostgreSQL: CREATE DATABASE spool_peer_<system>_<hex> on the server
of --database-url, dropped after the run; SQLite: a fresh file), systems
alternating, and prints medians (min, max) and the ratio Spool/peer.

Flags:
`

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nSystems:")
		for _, s := range allSystems {
			fmt.Fprintf(stderr, "  %-17s %s\n", s.name, s.about)
		}
	}
	o := &options{config: &config{}}
	fs.StringVar(&o.pgURL, "database-url", os.Getenv("SPOOL_DATABASE_URL"), "PostgreSQL `URL` whose server gets the fresh databases (default $SPOOL_DATABASE_URL)")
	fs.StringVar(&o.redisAddr, "redis-addr", "127.0.0.1:6379", "the shared Redis (`host:port`) of the asynq runs; they use its database 13, which must hold nothing but asynq's keys")
	systems := fs.String("systems", "", "comma-separated `systems` to run (default: every available one)")
	scenarios := fs.String("scenarios", "drain,insert,steady", "comma-separated `scenarios`")
	fs.IntVar(&o.reps, "reps", 3, "repetitions of each run")
	fs.IntVar(&o.jobs, "jobs", 100000, "jobs per drain run")
	fs.IntVar(&o.insertJobs, "insert-jobs", 100000, "jobs per insert run")
	fs.IntVar(&o.chunk, "chunk", 10000, "jobs per bulk insert call")
	fs.IntVar(&o.workers, "workers", 100, "worker concurrency of every system that has the setting")
	fs.Float64Var(&o.rate, "rate", 1000, "steady insert rate, jobs/s")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "steady measured duration")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "steady warm-up, inserted but not measured")
	fs.IntVar(&o.inflight, "inflight", 16, "steady: at most this many insert transactions at once")
	fs.IntVar(&o.graphileProcesses, "graphile-processes", runtime.NumCPU(), "Graphile Worker's worker processes, each with --workers concurrency (default: one per core, its documented way to use several cores)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 10*time.Minute, "give up on a run after this long")
	quick := fs.Bool("quick", false, "a quick check: 2,000 jobs, 1 rep, steady 2 s (overrides those flags)")
	fs.StringVar(&o.sqliteDir, "sqlite-dir", "", "`directory` for the SQLite files (default: a temporary directory)")
	fs.StringVar(&o.dir, "dir", ".", "this module's `directory` (holds go.riversqlite.mod and graphile/)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object (runs, summary, machine) instead of tables")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *quick {
		o.jobs, o.insertJobs, o.chunk, o.reps = 2000, 2000, 1000, 1
		o.duration, o.warmup = 2*time.Second, 500*time.Millisecond
	}
	var err error
	if o.systems, err = parseSystems(*systems); err != nil {
		return nil, err
	}
	if o.scenarios, err = parseScenarios(*scenarios); err != nil {
		return nil, err
	}
	switch {
	case o.reps < 1, o.jobs < 1, o.insertJobs < 1, o.chunk < 1, o.workers < 1, o.inflight < 1, o.graphileProcesses < 1:
		return nil, errors.New("--reps, --jobs, --insert-jobs, --chunk, --workers, --inflight and --graphile-processes must be at least 1")
	case o.rate <= 0 || o.duration <= 0 || o.warmup < 0 || o.runTimeout <= 0:
		return nil, errors.New("--rate, --duration and --run-timeout must be positive, --warmup not negative")
	}
	for _, s := range o.systems {
		if s.store == storePostgres && o.pgURL == "" {
			return nil, fmt.Errorf("system %s needs a PostgreSQL server: pass --database-url or set SPOOL_DATABASE_URL", s.name)
		}
	}
	return o, nil
}

func parseSystems(list string) ([]*system, error) {
	if list == "" {
		return defaultSystems(), nil
	}
	var out []*system
	for _, name := range strings.Split(list, ",") {
		s, err := findSystem(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if ok, why := s.available(); !ok {
			return nil, fmt.Errorf("system %s: %s", s.name, why)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseScenarios(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		switch name = strings.TrimSpace(name); name {
		case scenarioDrain, scenarioInsert, scenarioSteady:
			out = append(out, name)
		default:
			return nil, fmt.Errorf("unknown scenario %q (want drain, insert, steady)", name)
		}
	}
	return out, nil
}

// report is the --json output.
type report struct {
	Machine map[string]string `json:"machine"`
	Config  map[string]any    `json:"config"`
	Runs    []runRecord       `json:"runs"`
	Summary []*summaryRow     `json:"summary"`
}

func configJSON(c *config) map[string]any {
	names := make([]string, len(c.systems))
	for i, s := range c.systems {
		names[i] = s.name
	}
	return map[string]any{
		"systems": names, "scenarios": c.scenarios, "reps": c.reps, "jobs": c.jobs, "insert_jobs": c.insertJobs,
		"chunk": c.chunk, "workers": c.workers, "rate": c.rate, "duration": c.duration.String(),
		"warmup": c.warmup.String(), "inflight": c.inflight, "graphile_processes": c.graphileProcesses,
	}
}

// machine describes where the run happened.
func machine(ctx context.Context, o *options) map[string]string {
	m := map[string]string{
		"go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH,
		"cpus": fmt.Sprint(runtime.NumCPU()), "gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)),
	}
	if out, err := exec.CommandContext(ctx, "node", "--version").Output(); err == nil {
		m["node"] = strings.TrimSpace(string(out))
	}
	if o.pgURL != "" {
		if conn, err := pgx.Connect(ctx, o.pgURL); err == nil {
			var v string
			if conn.QueryRow(ctx, "SHOW server_version").Scan(&v) == nil {
				m["postgres"] = v
			}
			conn.Close(ctx)
		}
	}
	return m
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
