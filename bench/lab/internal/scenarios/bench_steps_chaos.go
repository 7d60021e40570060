package scenarios

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// steps-chaos: worker processes run jobs of five durable steps with random
// sleeps and signal waits under kill -9 and SIGSTOP, while the driver
// signals the waiting jobs (some before they wait). Every step function's
// run is appended to its process's audit log; the check compares the logs
// with the recorded steps (docs/durable.md).

func init() {
	registerBenchScenario("steps-chaos", "jobs of 5 durable steps with random sleeps and signal waits, under kill -9 and SIGSTOP of their worker processes",
		func(m *cli.Env) cli.Command { return &BenchStepsChaosCommand{m: m} })
}

// BenchStepsChaosCommand is the steps-chaos experiment.
type BenchStepsChaosCommand struct{ m *cli.Env }

// stepsChaosArgs is a job: five steps; after step SleepAfter (0: none) a
// Sleep of SleepMS; after step AwaitAfter (0: none) an AwaitSignal("go").
type stepsChaosArgs struct {
	Seq        int `json:"seq"`
	SleepAfter int `json:"sleep_after,omitempty"`
	SleepMS    int `json:"sleep_ms,omitempty"`
	AwaitAfter int `json:"await_after,omitempty"`
}

// Kind implements spool.JobArgs.
func (stepsChaosArgs) Kind() string { return "spool_steps_chaos" }

// stepsChaosTimeout is the signal wait's timeout: far beyond the run, so a
// timeout means a lost signal.
const stepsChaosTimeout = 10 * time.Minute

// Run implements cli.Command.
func (c *BenchStepsChaosCommand) Run(ctx context.Context, args []string) error {
	if slices.Contains(args, "--worker") {
		return runStepsChaosWorker(ctx, args)
	}
	r := bench.NewScenarioRun(c.m, "steps-chaos")
	jobs := r.Flags.Int("jobs", 500, "jobs")
	workers := r.Flags.Int("workers", 3, "worker processes")
	every := r.Flags.Duration("fault-every", 700*time.Millisecond, "a kill -9 or a SIGSTOP this often")
	limit := r.Flags.Duration("limit", 4*time.Minute, "give up after this long")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, closeStore, err := r.OpenStoreFor(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = closeStore() }()
	dir, err := os.MkdirTemp("", "spool-steps-chaos-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	client, err := spool.NewClient(store.Backend, &spool.Config{Logger: r.Logger()})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	params := make([]spool.InsertManyParams, *jobs)
	for i := range params {
		a := stepsChaosArgs{Seq: i}
		if rng.IntN(2) == 0 {
			a.SleepAfter, a.SleepMS = 1+rng.IntN(4), 100+rng.IntN(1500)
		}
		if rng.IntN(2) == 0 {
			a.AwaitAfter = 1 + rng.IntN(4)
		}
		params[i] = spool.InsertManyParams{Args: a}
	}
	ins, err := client.InsertMany(ctx, params)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		procs = make([]*exec.Cmd, *workers)
		gen   int
	)
	spawn := func(slot int) error {
		gen++
		cmd := exec.Command(self, "steps-chaos", "--worker", "--database-url", store.Scratch.URL,
			"--audit", filepath.Join(dir, fmt.Sprintf("audit-%d.log", gen)))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
		procs[slot] = cmd
		return nil
	}
	for slot := range procs {
		if err := spawn(slot); err != nil {
			return err
		}
	}
	defer func() {
		mu.Lock()
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGCONT)
			_ = p.Process.Kill()
		}
		mu.Unlock()
	}()
	// Signals: every job that awaits one gets it at a random moment of the
	// first half of the run's expected length, some before they wait.
	var awaiting []int64
	for i, p := range params {
		if p.Args.(stepsChaosArgs).AwaitAfter > 0 {
			awaiting = append(awaiting, ins[i].ID)
		}
	}
	rng.Shuffle(len(awaiting), func(i, j int) { awaiting[i], awaiting[j] = awaiting[j], awaiting[i] })
	signalErr := make(chan error, 1)
	go func() {
		for _, id := range awaiting {
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			if _, err := client.Signal(ctx, id, "go", id); err != nil {
				signalErr <- err
				return
			}
		}
		signalErr <- nil
	}()
	start := time.Now()
	kills, stops := 0, 0
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		stats, err := bench.QueueStats(ctx, client, spool.DefaultQueue)
		if err != nil {
			return err
		}
		if stats.Counts[backend.StateCompleted] == int64(*jobs) {
			break
		}
		if time.Since(start) > *limit {
			return fmt.Errorf("steps-chaos: %s passed with %s", *limit, bench.FormatCounts(stats))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case err := <-signalErr:
			if err != nil {
				return fmt.Errorf("steps-chaos: signal: %w", err)
			}
			continue
		case <-tick.C:
		}
		slot := rng.IntN(*workers)
		mu.Lock()
		p := procs[slot]
		if rng.IntN(2) == 0 {
			_ = p.Process.Kill()
			kills++
			if err := spawn(slot); err != nil {
				mu.Unlock()
				return err
			}
		} else {
			_ = p.Process.Signal(syscall.SIGSTOP)
			stops++
			pause := time.Duration(200+rng.IntN(4000)) * time.Millisecond // past the 2 s lease at times
			go func() {
				time.Sleep(pause)
				_ = p.Process.Signal(syscall.SIGCONT)
			}()
		}
		mu.Unlock()
	}
	took := time.Since(start)
	// The check: every job completed; no step function ran in an attempt
	// later than the one whose record committed; every awaited signal
	// came through (no timeout).
	runs, timeouts, err := readStepsAudit(dir)
	if err != nil {
		return err
	}
	rerunAfterRecord, missingRecords, recordedSteps := 0, 0, 0
	for _, id := range ins {
		d, err := client.JobDurable(ctx, id.ID)
		if err != nil {
			return err
		}
		recorded := map[string]int32{}
		for _, s := range d.Steps {
			recorded[s.Name] = s.Fence
		}
		for n := 1; n <= 5; n++ {
			name := fmt.Sprintf("step-%d", n)
			fence, ok := recorded[name]
			if !ok {
				missingRecords++
				continue
			}
			recordedSteps++
			for _, f := range runs[stepRunKey{id.ID, name}] {
				if f > fence {
					rerunAfterRecord++
				}
			}
		}
	}
	totalRuns := 0
	for _, fs := range runs {
		totalRuns += len(fs)
	}
	fmt.Fprintf(c.m.Stdout, "steps-chaos: %d jobs of 5 steps (%d awaiting a signal) on %s, %d worker processes: all completed in %s\n",
		*jobs, len(awaiting), store.Backend.Name(), *workers, took.Round(time.Millisecond))
	fmt.Fprintf(c.m.Stdout, "faults: %d kill -9, %d SIGSTOP (0.2 to 4.2 s, lease 2 s)\n", kills, stops)
	fmt.Fprintf(c.m.Stdout, "step functions run: %d for %d recorded steps (%d runs whose record did not commit, run again)\n",
		totalRuns, recordedSteps, totalRuns-recordedSteps)
	fmt.Fprintf(c.m.Stdout, "violations: %d step runs in an attempt after the one that recorded it, %d steps without a record, %d signal timeouts\n",
		rerunAfterRecord, missingRecords, timeouts)
	if rerunAfterRecord+missingRecords+timeouts > 0 {
		return errors.New("steps-chaos: guarantees violated")
	}
	return nil
}

// stepRunKey names one step of one job.
type stepRunKey struct {
	job  int64
	name string
}

// readStepsAudit reads every worker's audit: the fences each step function
// ran under, and how many signal waits timed out.
func readStepsAudit(dir string) (map[stepRunKey][]int32, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "audit-*.log"))
	if err != nil {
		return nil, 0, err
	}
	runs := map[stepRunKey][]int32{}
	timeouts := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, 0, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			switch {
			case len(fields) == 4 && fields[0] == "ran":
				id, _ := strconv.ParseInt(fields[1], 10, 64)
				fence, _ := strconv.ParseInt(fields[2], 10, 32)
				k := stepRunKey{id, fields[3]}
				runs[k] = append(runs[k], int32(fence))
			case len(fields) >= 1 && fields[0] == "timeout":
				timeouts++
			}
		}
		fh.Close()
	}
	return runs, timeouts, nil
}

// runStepsChaosWorker works the store's default queue until killed or
// told to stop, appending each step function's run to the audit log.
func runStepsChaosWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("steps-chaos worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_ = fs.Bool("worker", true, "")
	dsn := fs.String("database-url", "", "")
	auditPath := fs.String("audit", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	audit, err := openAuditLog(*auditPath)
	if err != nil {
		return err
	}
	be, err := backend.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer be.Close()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[stepsChaosArgs]) error {
		for n := 1; n <= 5; n++ {
			name := fmt.Sprintf("step-%d", n)
			if _, err := spool.Step(ctx, name, func(ctx context.Context) (int, error) {
				audit.write(fmt.Sprintf("ran %d %d %s\n", j.ID, j.Fence, name))
				return n, nil
			}); err != nil {
				return err
			}
			if j.Args.SleepAfter == n {
				if err := spool.Sleep(ctx, time.Duration(j.Args.SleepMS)*time.Millisecond); err != nil {
					return err
				}
			}
			if j.Args.AwaitAfter == n {
				p, err := spool.AwaitSignal(ctx, "go", stepsChaosTimeout)
				if errors.Is(err, spool.ErrSignalTimeout) {
					audit.write(fmt.Sprintf("timeout %d\n", j.ID))
				}
				if err != nil {
					return err
				}
				var got int64
				if json.Unmarshal(p, &got) != nil || got != j.ID {
					return fmt.Errorf("signal payload %s, want %d", p, j.ID)
				}
			}
		}
		return nil
	}))
	client, err := spool.NewClient(be, &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 16}},
		LeaseDuration:  2 * time.Second,
		PollInterval:   100 * time.Millisecond,
		RescueInterval: 250 * time.Millisecond,
		RetryPolicy:    spool.ConstantRetryPolicy{Delay: 0},
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return client.Stop(sctx)
}

// Usage implements cli.Command.
func (c *BenchStepsChaosCommand) Usage() string {
	return strings.TrimLeft(`
Usage: go run ./bench/lab steps-chaos [flags]

Inserts jobs of five durable steps (spool.Step), half with a Sleep after a
random step and half with an AwaitSignal("go") after one, into a scratch
store; runs them on worker processes of this binary while killing one
with SIGKILL or stopping one with SIGSTOP (0.2 to 4.2 s, past the 2 s
lease at times) every --fault-every, and signals every waiting job at a
random moment (some before they wait). Then it checks: every job
completed; no step function ran in an attempt later than the one whose
record committed (audit logs against spool_steps); every step recorded; no signal wait timed out.

Flags:

	--jobs N
		jobs (default 500)
	--workers N
		worker processes (default 3)
	--fault-every DURATION
		a kill -9 or a SIGSTOP this often (default 700ms)
	--limit DURATION
		give up after this long (default 4m)
`+bench.CommonUsage, "\n")
}
