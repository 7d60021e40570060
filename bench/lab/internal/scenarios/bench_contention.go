package scenarios

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"
)

func init() {
	registerBenchScenario("contention", "SQLite: writers of many processes waiting for the write lock, fair vs back-off busy handler (the SQLite busy-handler study of Rails' sqlite3 gem)",
		func(m *cli.Env) cli.Command { return &BenchContentionCommand{m: m} })
}

// BenchContentionCommand reproduces the busy-handler study of Rails' sqlite3 gem (constant 1 ms polling
// against back-off) on a
// SQLite file: child processes × threads each run one short write
// transaction while this process runs 0, 1 or 2 long ones, under the fair
// busy handler and under SQLite's back-off, and reports how long the fastest
// and the slowest short writer waited.
type BenchContentionCommand struct{ m *cli.Env }

// contentionRun is one cell: a mode and a contention shape.
type contentionRun struct {
	Mode      string  `json:"mode"`
	Processes int     `json:"processes"`
	Threads   int     `json:"threads"`
	Slow      int     `json:"slow"`
	ParentMS  float64 `json:"parent_ms"`  // the long transactions, together
	FastestMS float64 `json:"fastest_ms"` // the quickest short writer, from its start to its commit
	SlowestMS float64 `json:"slowest_ms"` // the slowest short writer
	ScriptMS  float64 `json:"script_ms"`  // from the start to the last commit
	Failed    int     `json:"failed"`     // short writers that hit the busy timeout
}

// contentionResult is the outcome of lab contention, as printed with --json.
type contentionResult struct {
	Scenario    string          `json:"scenario"`
	Store       string          `json:"store"`
	SlowMS      float64         `json:"slow_ms"`
	DelayMS     float64         `json:"delay_ms"`
	BusyTimeout string          `json:"busy_timeout"`
	Runs        []contentionRun `json:"runs"`
}

// Run implements cli.Command.
func (c *BenchContentionCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("contention", flag.ContinueOnError)
	common := bench.AddCommon(fs)
	processes := fs.String("processes", "4,8", "child process counts to try")
	threads := fs.String("threads", "2,4", "threads (connections) per child to try")
	slow := fs.String("slow", "0,1,2", "numbers of long transactions the parent runs, to try")
	modes := fs.String("modes", "fair,backoff", "busy handlers to compare")
	slowFor := fs.Duration("slow-duration", time.Second, "how long each long transaction holds the write lock")
	delay := fs.Duration("delay", 200*time.Millisecond, "when the short writers start, after the first long transaction")
	busyTimeout := fs.Duration("busy-timeout", 30*time.Second, "busy timeout of every connection")
	child := fs.String("child", "", "internal: run as a child process on this file")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	const name = "contention"
	if *child != "" {
		return runContentionChild(ctx, c.m, *child, args)
	}
	if len(pos) > 0 {
		return cli.Usagef(name, "unexpected argument %q", pos[0])
	}
	procList, err1 := parseIntList(*processes, 1, 64)
	threadList, err2 := parseIntList(*threads, 1, 64)
	slowList, err3 := parseIntList(*slow, 0, 10)
	if err := errors.Join(err1, err2, err3); err != nil {
		return cli.Usagef(name, "%v", err)
	}
	modeList := strings.Split(*modes, ",")
	for _, m := range modeList {
		if m != sqlite.BusyFair && m != sqlite.BusyBackoff {
			return cli.Usagef(name, "--modes: %q is not fair or backoff", m)
		}
	}
	if *slowFor <= 0 || *delay < 0 || *busyTimeout <= 0 {
		return cli.Usagef(name, "--slow-duration and --busy-timeout must be positive, --delay not negative")
	}
	dsn, err := cli.DatabaseURL(*common.DBURL)
	if err != nil {
		return err
	}
	if stores.Scheme(dsn) != "sqlite" {
		return cli.Usagef(name, "contention measures SQLite's write lock: give a sqlite:// URL (or none)")
	}
	store, err := bench.OpenStore(ctx, c.m, common)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			fmt.Fprintf(c.m.Stderr, "spool: %v\n", cerr)
		}
	}()
	path := store.Backend.(*sqlite.Backend).Path()

	res := contentionResult{Scenario: "contention", Store: path, SlowMS: bench.MS(*slowFor), DelayMS: bench.MS(*delay), BusyTimeout: busyTimeout.String()}
	total := len(procList) * len(threadList) * len(slowList) * len(modeList)
	done := 0
	progress := common.ProgressWriter(c.m.Stderr)
	for _, s := range slowList {
		for _, p := range procList {
			for _, th := range threadList {
				// Modes alternate within a cell, so both see the same machine.
				for _, mode := range modeList {
					fmt.Fprintf(progress, "contention: %d/%d: %s, %d processes × %d threads, %d long\n", done+1, total, mode, p, th, s)
					run, err := runContentionCell(ctx, path, mode, p, th, s, *slowFor, *delay, *busyTimeout)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					res.Runs = append(res.Runs, run)
					done++
				}
			}
		}
	}
	if *common.AsJSON {
		return cli.WriteJSON(c.m.Stdout, res)
	}
	return printContention(c.m.Stdout, &res)
}

// parseIntList parses "1,2,3" with each value in [lo, hi].
func parseIntList(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%q: want integers from %d to %d, comma-separated", s, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// openContender opens a backend on path with connections of its own, as a
// separate process would have.
func openContender(ctx context.Context, path, mode string, busyTimeout time.Duration) (*sqlite.Backend, error) {
	return sqlite.OpenPath(ctx, path, &sqlite.Options{Separate: true, Busy: mode, BusyTimeout: busyTimeout, Readers: 1})
}

// shortWrite is the short writers' transaction: the write lock and a
// trivial statement.
func shortWrite(tx *sql.Tx) error {
	var one int
	return tx.QueryRow(`SELECT 1`).Scan(&one)
}

// runContentionCell runs one mode and shape: it starts the children, waits
// until every connection is open, then runs the long transactions while the
// children's short ones start after delay.
func runContentionCell(ctx context.Context, path, mode string, processes, threads, slow int, slowFor, delay, busyTimeout time.Duration) (contentionRun, error) {
	run := contentionRun{Mode: mode, Processes: processes, Threads: threads, Slow: slow}
	parent, err := openContender(ctx, path, mode, busyTimeout)
	if err != nil {
		return run, err
	}
	defer parent.Close()
	self, err := os.Executable()
	if err != nil {
		return run, err
	}
	type child struct {
		cmd   *exec.Cmd
		in    io.WriteCloser
		lines *bufio.Scanner
	}
	children := make([]child, 0, processes)
	defer func() {
		for _, ch := range children {
			_ = ch.in.Close()
			_ = ch.cmd.Process.Kill()
			_ = ch.cmd.Wait()
		}
	}()
	for i := 0; i < processes; i++ {
		cmd := exec.CommandContext(ctx, self, "contention", "--child", path, "--modes", mode,
			"--threads", strconv.Itoa(threads), "--busy-timeout", busyTimeout.String())
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return run, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return run, err
		}
		if err := cmd.Start(); err != nil {
			return run, fmt.Errorf("start child: %w", err)
		}
		ch := child{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
		children = append(children, ch)
		if !ch.lines.Scan() || ch.lines.Text() != "ready" {
			return run, fmt.Errorf("child %d did not get ready: %q %v", i, ch.lines.Text(), ch.lines.Err())
		}
	}
	// One start time for everyone, a little ahead so every child has it.
	t0 := time.Now().Add(20 * time.Millisecond)
	shortAt := t0
	if slow > 0 {
		shortAt = t0.Add(delay)
	}
	for _, ch := range children {
		if _, err := fmt.Fprintf(ch.in, "%d\n", shortAt.UnixNano()); err != nil {
			return run, err
		}
	}
	time.Sleep(time.Until(t0))
	parentDone := t0
	for i := 0; i < slow; i++ {
		if i > 0 {
			time.Sleep(time.Millisecond) // the study's 1 ms gap between the long transactions
		}
		err := parent.WriteTx(ctx, func(tx *sql.Tx) error {
			if err := shortWrite(tx); err != nil {
				return err
			}
			time.Sleep(slowFor) // hold the write lock, as a long statement would
			return nil
		})
		if err != nil {
			return run, fmt.Errorf("long transaction: %w", err)
		}
		parentDone = time.Now()
	}
	run.ParentMS = bench.MS(parentDone.Sub(t0))
	var waits []time.Duration
	last := parentDone
	for i, ch := range children {
		for ch.lines.Scan() {
			line := ch.lines.Text()
			if line == "done" {
				break
			}
			var r struct {
				WaitNS int64  `json:"wait_ns"`
				EndNS  int64  `json:"end_ns"`
				Err    string `json:"err"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return run, fmt.Errorf("child %d: %q: %w", i, line, err)
			}
			if r.Err != "" {
				if !strings.Contains(r.Err, sqlite.ErrBusy.Error()) {
					return run, fmt.Errorf("child %d: %s", i, r.Err)
				}
				run.Failed++
				continue
			}
			waits = append(waits, time.Duration(r.WaitNS))
			if end := time.Unix(0, r.EndNS); end.After(last) {
				last = end
			}
		}
		if err := ch.lines.Err(); err != nil {
			return run, fmt.Errorf("child %d: %w", i, err)
		}
	}
	if len(waits) > 0 {
		run.FastestMS, run.SlowestMS = bench.MS(slices.Min(waits)), bench.MS(slices.Max(waits))
	}
	run.ScriptMS = bench.MS(last.Sub(t0))
	return run, nil
}

// runContentionChild is a child process: it opens its connections, says
// "ready", reads the start time from stdin, runs one short write per thread
// from then on, and prints one JSON line per thread and then "done".
func runContentionChild(ctx context.Context, m *cli.Env, path string, args []string) error {
	fs := flag.NewFlagSet("contention child", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_ = fs.String("child", "", "")
	mode := fs.String("modes", sqlite.BusyFair, "")
	threads := fs.Int("threads", 1, "")
	busyTimeout := fs.Duration("busy-timeout", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conns := make([]*sqlite.Backend, *threads)
	for i := range conns {
		be, err := openContender(ctx, path, *mode, *busyTimeout)
		if err != nil {
			return err
		}
		defer be.Close()
		// Open the writer connection now, not in the measured write.
		if _, err := be.SchemaVersion(ctx); err != nil {
			return err
		}
		conns[i] = be
	}
	fmt.Fprintln(m.Stdout, "ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("no start time on stdin")
	}
	ns, err := strconv.ParseInt(in.Text(), 10, 64)
	if err != nil {
		return err
	}
	start := time.Unix(0, ns)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	enc := json.NewEncoder(m.Stdout)
	for _, be := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start))
			began := time.Now()
			err := be.WriteTx(ctx, shortWrite)
			end := time.Now()
			line := map[string]any{"wait_ns": end.Sub(began).Nanoseconds(), "end_ns": end.UnixNano()}
			if err != nil {
				line["err"] = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(line)
		}()
	}
	wg.Wait()
	fmt.Fprintln(m.Stdout, "done")
	return nil
}

// printContention prints the runs as the study's tables do, then the slowest
// short writer of each shape side by side.
func printContention(w io.Writer, r *contentionResult) error {
	fmt.Fprintf(w, "contention on %s: long transactions of %.0f ms, short writers start %.0f ms after the first\n\n",
		r.Store, r.SlowMS, r.DelayMS)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MODE\tCONTENTION (P/T/S)\tPARENT ms\tFASTEST ms\tSLOWEST ms\tSCRIPT ms\tFAILED\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d (%d/%d/%d)\t%.0f\t%.1f\t%.1f\t%.0f\t%d\t\n", run.Mode, run.Processes*run.Threads+run.Slow,
			run.Processes, run.Threads, run.Slow, run.ParentMS, run.FastestMS, run.SlowestMS, run.ScriptMS, run.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	type shape struct{ p, t, s int }
	slowest := map[shape]map[string]float64{}
	var order []shape
	for _, run := range r.Runs {
		k := shape{run.Processes, run.Threads, run.Slow}
		if slowest[k] == nil {
			slowest[k] = map[string]float64{}
			order = append(order, k)
		}
		slowest[k][run.Mode] = run.SlowestMS
	}
	fmt.Fprintln(w, "\nslowest short writer, side by side:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "P/T/S\tfair ms\tbackoff ms\tbackoff/fair\t")
	for _, k := range order {
		f, b := slowest[k][sqlite.BusyFair], slowest[k][sqlite.BusyBackoff]
		ratio := "-"
		if f > 0 && b > 0 {
			ratio = fmt.Sprintf("%.2f", b/f)
		}
		fmt.Fprintf(tw, "%d/%d/%d\t%.1f\t%.1f\t%s\t\n", k.p, k.t, k.s, f, b, ratio)
	}
	return tw.Flush()
}

// Usage implements cli.Command.
func (c *BenchContentionCommand) Usage() string {
	return `Usage: lab contention [flags]

Reproduces the SQLite busy-handler study of Rails' sqlite3 gem (back-off
against constant 1 ms polling, and tail latency) on a scratch SQLite file. For each
shape (child processes × threads per child, and 0, 1 or 2 long transactions
in this process) and each busy handler, every child thread opens its own
connection and runs one short write transaction; the long transactions
hold the write lock for --slow-duration each, and the short writers start
--delay after the first one. Prints how long the parent's long
transactions took, the fastest and the slowest short writer (from its start
to its commit) and the whole run, per mode, then the slowest writer of
each shape under both handlers side by side. The fair handler retries every
millisecond; SQLite's back-off sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50,
50, 100 ms: a waiter that has waited long sleeps long, and a newcomer can
take the lock first.

Flags:

	--processes LIST
		child process counts (default 4,8)
	--threads LIST
		connections per child (default 2,4)
	--slow LIST
		long transactions in the parent (default 0,1,2)
	--modes LIST
		busy handlers: fair, backoff (default fair,backoff)
	--slow-duration DURATION
		each long transaction's hold on the write lock (default 1s)
	--delay DURATION
		short writers start this long after the first long transaction
		(default 200ms)
	--busy-timeout DURATION
		busy timeout of every connection (default 30s)
` + bench.CommonUsage
}
