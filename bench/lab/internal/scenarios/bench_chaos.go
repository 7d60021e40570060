package scenarios

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func init() {
	registerBenchScenario("chaos", "worker processes under kill -9, SIGSTOP, connection kills and server restarts; audits every start and completion",
		func(m *cli.Env) cli.Command { return &BenchChaosCommand{m: m} })
}

// BenchChaosCommand runs worker processes of the lab binary against a
// store while it injects faults (kill -9 of a worker and of the maintenance
// leader, SIGSTOP past the lease, connection kills, server restarts), then
// checks the audit of every handler start and committed completion against
// Spool's guarantees (docs/guarantees.md). PostgreSQL and MariaDB run on
// servers of its own, never on the one --database-url names.
type BenchChaosCommand struct{ m *cli.Env }

// chaosOptions are the settings of one run.
type chaosOptions struct {
	duration    time.Duration
	jobs        int
	workers     int
	concurrency int
	lease       time.Duration
	work        time.Duration
	stopTimeout time.Duration
	seed        uint64
	drain       time.Duration
	keepDir     bool
	// claimCommit, when set, is PostgreSQL's spool_claim_commit for the
	// workers (async: claims a crash can undo).
	claimCommit string
	// failover, when set, runs PostgreSQL as a pg_auto_failover formation
	// with these timeouts, and the only faults are failovers losing
	// the primary's whole node: failovers of them, evenly spaced.
	failover  *dbserver.FailoverTimeouts
	failovers int
	// compose sizes the composed workloads run beside the plain jobs;
	// debounceUntil is when the workers stop their debounced inserts.
	compose       composeOptions
	debounceUntil time.Time
	progress      io.Writer
	terminal      bool
	logs          io.Writer
}

// chaosRound is one backend's result, as printed with --json.
type chaosRound struct {
	Backend        string         `json:"backend"`
	Seed           uint64         `json:"seed"`
	FaultSeconds   float64        `json:"fault_seconds"`
	DrainSeconds   float64        `json:"drain_seconds"`
	JobsTarget     int            `json:"jobs_target"`
	Workers        int            `json:"worker_processes"`
	Concurrency    int            `json:"workers_per_process"`
	LeaseMS        float64        `json:"lease_ms"`
	WorkMS         float64        `json:"work_ms"`
	Faults         map[string]int `json:"faults"`
	FaultLog       []chaosFault   `json:"fault_log"`
	WorkerRestarts int            `json:"worker_restarts"`
	// UnexpectedExits counts worker processes that exited without being
	// killed (their last words are on stderr).
	UnexpectedExits int `json:"unexpected_worker_exits"`
	// SlowStops counts workers that, sent SIGTERM, had not exited within
	// their Stop deadline plus 2 s (they were then killed); MaxStopMS is the
	// longest a worker took to exit after SIGTERM.
	SlowStops int     `json:"slow_stops"`
	MaxStopMS float64 `json:"max_stop_ms"`
	// WriteOutagesS is, for each fault of a failover run, the seconds
	// from the fault to the first insert that succeeded after it (an
	// insert is tried every 100 ms).
	WriteOutagesS []float64 `json:"write_outages_s,omitempty"`
	chaosCheck
	// Compose is the verdict on the composed workloads, if any ran.
	Compose *composeCheck `json:"compose,omitempty"`
	OK      bool          `json:"ok"`
}

// chaosResult is the output of lab chaos.
type chaosResult struct {
	Scenario string       `json:"scenario"`
	Rounds   []chaosRound `json:"rounds"`
	OK       bool         `json:"ok"`
}

// Run implements cli.Command.
func (c *BenchChaosCommand) Run(ctx context.Context, args []string) error {
	if slices.Contains(args, "--worker") {
		return runChaosWorker(ctx, c.m, args)
	}
	const name = "chaos"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	which := fs.String("backend", "all", "postgres, mysql, sqlite or all")
	duration := fs.Duration("duration", 3*time.Minute, "how long faults are injected, per backend")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule and the jobs")
	markdown := fs.Bool("markdown", false, "print the results as the markdown tables of docs/guarantees.md")
	claimCommit := fs.String("claim-commit", "", "PostgreSQL: the workers' spool_claim_commit, sync or async (default: the backend's, sync)")
	load := addChaosLoadFlags(fs, chaosLoadDefaults{jobs: 50000, workers: 4, concurrency: 4,
		work: 40 * time.Millisecond, lease: 3 * time.Second, drain: 2 * time.Minute})
	var co composeOptions
	fs.IntVar(&co.workflowTasks, "workflow-tasks", 0, "tasks of a workflow run beside the jobs (0: none)")
	fs.IntVar(&co.batches, "batches", 0, "batches with callbacks run beside the jobs")
	fs.IntVar(&co.batchSize, "batch-size", 20, "members per batch")
	fs.IntVar(&co.many, "many-jobs", 0, "jobs of a many-worker (spool.AddManyWorker)")
	fs.IntVar(&co.steps, "step-jobs", 0, "jobs of 5 durable steps with random sleeps and signal waits")
	fs.IntVar(&co.debounceKeys, "debounce-keys", 0, "keys each worker process inserts debounced jobs of (0: none)")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	var backends []string
	switch *which {
	case "all":
		backends = []string{"postgres", "mysql", "sqlite"}
	case "postgres", "mysql", "sqlite":
		backends = []string{*which}
	default:
		return cli.Usagef(name, "--backend %q: want postgres, mysql, sqlite or all", *which)
	}
	switch {
	case len(pos) > 0:
		return cli.Usagef(name, "unexpected argument %q", pos[0])
	case *duration < 5*time.Second || *duration > 2*time.Hour:
		return cli.Usagef(name, "--duration must be between 5s and 2h")
	case *claimCommit != "" && *claimCommit != "sync" && *claimCommit != "async":
		return cli.Usagef(name, "--claim-commit must be sync or async")
	case *markdown && *load.asJSON:
		return cli.Usagef(name, "--markdown and --json exclude each other")
	case co.workflowTasks < 0 || co.workflowTasks > spool.MaxWorkflowTasks:
		return cli.Usagef(name, "--workflow-tasks must be between 0 and %d", spool.MaxWorkflowTasks)
	case co.batches < 0 || co.batches > 10_000 || co.batchSize < 2 || co.batchSize > 10_000:
		return cli.Usagef(name, "--batches must be between 0 and 10000, --batch-size between 2 and 10000")
	case co.many < 0 || co.many > 1_000_000 || co.steps < 0 || co.steps > 1_000_000:
		return cli.Usagef(name, "--many-jobs and --step-jobs must be between 0 and 1000000")
	case co.debounceKeys < 0 || co.debounceKeys > 1000:
		return cli.Usagef(name, "--debounce-keys must be between 0 and 1000")
	}
	if err := load.check(name); err != nil {
		return err
	}
	ctx, cancel := load.withTimeout(ctx, name)
	defer cancel()
	o := load.options(c.m, *duration, *seed)
	o.claimCommit = *claimCommit
	o.compose = co
	res := chaosResult{Scenario: "chaos", OK: true}
	var failed []string
	for _, be := range backends {
		round, err := runChaosRound(ctx, o, be)
		if err != nil {
			return bench.WithCause(ctx, fmt.Errorf("%s: %s: %w", name, be, err))
		}
		res.Rounds = append(res.Rounds, *round)
		if !round.OK {
			res.OK = false
			failed = append(failed, be+": "+strings.Join(round.Violations, ", "))
		}
	}
	switch {
	case *load.asJSON:
		err = cli.WriteJSON(c.m.Stdout, res)
	case *markdown:
		err = printChaosMarkdown(c.m.Stdout, &res)
	default:
		err = printChaos(c.m.Stdout, &res)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: invariants violated: %s", name, strings.Join(failed, "; "))
	}
	return nil
}

// chaosLoadFlags are the flags lab chaos and lab failover share: the
// load of worker processes and jobs, and the run's bounds and output.
type chaosLoadFlags struct {
	jobs, workers, concurrency  *int
	work, lease, drain, timeout *time.Duration
	asJSON, quiet, keepDir      *bool
}

// chaosLoadDefaults are a command's defaults for chaosLoadFlags.
type chaosLoadDefaults struct {
	jobs, workers, concurrency int
	work, lease, drain         time.Duration
}

func addChaosLoadFlags(fs *flag.FlagSet, d chaosLoadDefaults) *chaosLoadFlags {
	return &chaosLoadFlags{
		jobs:        fs.Int("jobs", d.jobs, "jobs inserted while faults are injected"),
		workers:     fs.Int("workers", d.workers, "worker processes"),
		concurrency: fs.Int("concurrency", d.concurrency, "workers (MaxWorkers) per process"),
		work:        fs.Duration("work", d.work, "mean handler time (uniform from 10% to 190% of it)"),
		lease:       fs.Duration("lease", d.lease, "LeaseDuration of the workers"),
		drain:       fs.Duration("drain-timeout", d.drain, "how long the queue may take to drain after the faults"),
		asJSON:      fs.Bool("json", false, "print only a JSON object on stdout"),
		quiet:       fs.Bool("quiet", false, "no progress on stderr"),
		timeout:     fs.Duration("timeout", 0, "give up after this long (0: no limit)"),
		keepDir:     fs.Bool("keep-dir", false, "keep the temporary directory (audit and server logs)"),
	}
}

// check returns the usage error of the first flag out of range.
func (f *chaosLoadFlags) check(name string) error {
	switch {
	case *f.jobs < 1 || *f.jobs > 5_000_000:
		return cli.Usagef(name, "--jobs must be between 1 and 5000000")
	case *f.workers < 2 || *f.workers > 64:
		return cli.Usagef(name, "--workers must be between 2 and 64")
	case *f.concurrency < 1 || *f.concurrency > 1000:
		return cli.Usagef(name, "--concurrency must be between 1 and 1000")
	case *f.lease < time.Second || *f.lease > time.Minute:
		return cli.Usagef(name, "--lease must be between 1s and 1m")
	case *f.work < 0 || *f.work > 10*time.Second:
		return cli.Usagef(name, "--work must be between 0 and 10s")
	case *f.drain < time.Second || *f.drain > time.Hour:
		return cli.Usagef(name, "--drain-timeout must be between 1s and 1h")
	case *f.timeout < 0:
		return cli.Usagef(name, "--timeout must not be negative")
	}
	return nil
}

// withTimeout bounds ctx by --timeout, if given.
func (f *chaosLoadFlags) withTimeout(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	if *f.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, *f.timeout, fmt.Errorf("%s: --timeout %s reached", name, *f.timeout))
}

// options returns the options of a run of duration with the flags' load.
func (f *chaosLoadFlags) options(env *cli.Env, duration time.Duration, seed uint64) *chaosOptions {
	stderr := &bench.LockedWriter{W: env.Stderr}
	o := &chaosOptions{duration: duration, jobs: *f.jobs, workers: *f.workers, concurrency: *f.concurrency,
		lease: *f.lease, work: *f.work, stopTimeout: 2 * time.Second, keepDir: *f.keepDir, seed: seed, drain: *f.drain,
		progress: io.Discard, terminal: env.StderrTerminal, logs: stderr}
	if !*f.quiet {
		o.progress = stderr
	}
	return o
}

// chaosFaultKinds lists the faults injected on a backend.
func chaosFaultKinds(be string) []string {
	kinds := []string{"kill_worker", "kill_leader", "sigstop", "stop_worker"}
	switch be {
	case "postgres":
		kinds = append(kinds, "conn_kill", "restart_fast", "restart_immediate")
	case "mysql":
		kinds = append(kinds, "conn_kill", "restart_clean", "restart_kill")
	}
	return kinds
}

// plannedFault is one entry of the fault schedule.
type plannedFault struct {
	at   time.Duration
	kind string
	pick int // chooses the worker, for faults that hit one
}

// chaosSchedule returns the fault schedule of a run: one fault about every
// six seconds (at least one of each kind), kinds in seeded shuffled passes,
// times jittered. The same seed gives the same schedule.
func chaosSchedule(seed uint64, be string, d time.Duration) []plannedFault {
	rng := rand.New(rand.NewPCG(seed, 0x63686173))
	kinds := chaosFaultKinds(be)
	n := max(len(kinds), int(d/(6*time.Second)))
	gap := (d - 2*time.Second) / time.Duration(n+1)
	var out []plannedFault
	var pass []string
	for i := 0; i < n; i++ {
		if len(pass) == 0 {
			pass = slices.Clone(kinds)
			rng.Shuffle(len(pass), func(a, b int) { pass[a], pass[b] = pass[b], pass[a] })
		}
		jitter := time.Duration(rng.Int64N(int64(gap/2)+1)) - gap/4
		out = append(out, plannedFault{at: time.Second + gap*time.Duration(i+1) + jitter, kind: pass[0], pick: rng.IntN(1 << 20)})
		pass = pass[1:]
	}
	return out
}

// failoverSchedule spaces n failovers evenly over d, the first after a
// tenth of it, so that work is under way before the first and the queue
// has time to drain after the last.
func failoverSchedule(n int, d time.Duration) []plannedFault {
	out := make([]plannedFault, n)
	gap := d * 8 / 10 / time.Duration(max(n, 1))
	for i := range out {
		out[i] = plannedFault{at: d/10 + gap*time.Duration(i), kind: "restart_failover"}
	}
	return out
}

// chaosStore is the parent's view of the store under test.
type chaosStore struct {
	be       backend.Backend
	url      string
	client   *spool.Client // insert-only
	exec     func(ctx context.Context, stmt string) error
	leader   func(ctx context.Context) (string, error)
	killConn func(ctx context.Context) (int, error)
	effects  func(ctx context.Context) ([]chaosEffect, error)
}

// openChaosStore opens and migrates the scratch store and creates the
// effect table.
func openChaosStore(ctx context.Context, url string) (*chaosStore, error) {
	be, err := backend.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	s := &chaosStore{be: be, url: url}
	if err := be.Migrate(ctx); err != nil {
		_ = be.Close()
		return nil, err
	}
	var ddl string
	switch b := be.(type) {
	case *postgres.Backend:
		table := pgx.Identifier{b.Schema(), chaosEffectsTable}.Sanitize()
		leaderTable := pgx.Identifier{b.Schema(), "spool_leader"}.Sanitize()
		ddl = "CREATE TABLE " + table + " (job_id bigint NOT NULL, fence integer NOT NULL, proc text NOT NULL)"
		s.exec = func(ctx context.Context, stmt string) error { _, err := b.Pool().Exec(ctx, stmt); return err }
		s.leader = func(ctx context.Context) (string, error) {
			var id string
			err := b.Pool().QueryRow(ctx, "SELECT leader_id FROM "+leaderTable+" WHERE name = 'maintenance' AND expires_at > now()").Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			return id, err
		}
		s.killConn = func(ctx context.Context) (int, error) {
			var n int
			err := b.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n)
			return n, err
		}
		s.effects = func(ctx context.Context) ([]chaosEffect, error) {
			rows, err := b.Pool().Query(ctx, "SELECT job_id, fence FROM "+table)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(r pgx.CollectableRow) (chaosEffect, error) {
				var e chaosEffect
				err := r.Scan(&e.ID, &e.Fence)
				return e, err
			})
		}
	case *mysql.Backend:
		db := b.DB()
		ddl = "CREATE TABLE " + chaosEffectsTable + " (job_id BIGINT NOT NULL, fence INT NOT NULL, proc VARCHAR(64) NOT NULL) ENGINE=InnoDB"
		s.exec = func(ctx context.Context, stmt string) error { _, err := db.ExecContext(ctx, stmt); return err }
		s.leader = sqlLeader(db, "SELECT leader_id FROM spool_leader WHERE name = 'maintenance' AND expires_at > NOW(6)")
		s.killConn = func(ctx context.Context) (int, error) {
			rows, err := db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()", b.Database())
			if err != nil {
				return 0, err
			}
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return 0, err
				}
				ids = append(ids, id)
			}
			rows.Close()
			n := 0
			for _, id := range ids {
				// A connection may be gone by now (error 1094, unknown thread).
				if _, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
					n++
				}
			}
			return n, nil
		}
		s.effects = sqlEffects(db)
	case *sqlite.Backend:
		db := b.DB()
		ddl = "CREATE TABLE " + chaosEffectsTable + " (job_id INTEGER NOT NULL, fence INTEGER NOT NULL, proc TEXT NOT NULL)"
		s.exec = func(ctx context.Context, stmt string) error {
			return b.WriteTx(ctx, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, stmt); return err })
		}
		s.leader = func(ctx context.Context) (string, error) {
			return sqlLeader(db, "SELECT leader_id FROM spool_leader WHERE name = 'maintenance' AND expires_at > "+
				strconv.FormatInt(time.Now().UnixMicro(), 10))(ctx)
		}
		s.killConn = nil
		s.effects = sqlEffects(db)
	default:
		_ = be.Close()
		return nil, fmt.Errorf("no chaos support for the %s backend", be.Name())
	}
	if err := s.exec(ctx, ddl); err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("create effect table: %w", err)
	}
	if s.client, err = spool.NewClient(be, &spool.Config{Logger: bench.Logger(io.Discard)}); err != nil {
		_ = be.Close()
		return nil, err
	}
	return s, nil
}

func sqlLeader(db *sql.DB, query string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		var id string
		err := db.QueryRowContext(ctx, query).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		return id, err
	}
}

func sqlEffects(db *sql.DB) func(ctx context.Context) ([]chaosEffect, error) {
	return func(ctx context.Context) ([]chaosEffect, error) {
		rows, err := db.QueryContext(ctx, "SELECT job_id, fence FROM "+chaosEffectsTable)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []chaosEffect
		for rows.Next() {
			var e chaosEffect
			if err := rows.Scan(&e.ID, &e.Fence); err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, rows.Err()
	}
}

// chaosProc is one worker process.
type chaosProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	// killed: the parent ended it on purpose.
	killed bool
}

// chaosPool keeps --workers worker processes running.
type chaosPool struct {
	self, url, dir string
	o              *chaosOptions
	mu             sync.Mutex
	procs          []*chaosProc
	gens           []int
	restarts       int
	unexpected     int
	slowStops      int
	maxStop        time.Duration
	closed         bool
}

func (p *chaosPool) spawnLocked(slot int) error {
	name := fmt.Sprintf("w%dg%d", slot, p.gens[slot])
	p.gens[slot]++
	logf, err := os.Create(filepath.Join(p.dir, "worker-"+name+".err"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.self, "chaos", "--worker", "--database-url", p.url, "--proc", name,
		"--audit", filepath.Join(p.dir, "audit-"+name+".log"),
		"--concurrency", strconv.Itoa(p.o.concurrency), "--lease", p.o.lease.String(), "--stop-timeout", p.o.stopTimeout.String())
	if p.o.compose.enabled() {
		cmd.Args = append(cmd.Args, "--compose", "--debounce-keys", strconv.Itoa(p.o.compose.debounceKeys),
			"--debounce-until", strconv.FormatInt(p.o.debounceUntil.UnixNano(), 10))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker %s: %w", name, err)
	}
	proc := &chaosProc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(proc.exited)
	}()
	p.procs[slot] = proc
	return nil
}

// supervise restarts workers that exited on their own, every 200 ms, until
// ctx ends.
func (p *chaosPool) supervise(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		for slot, proc := range p.procs {
			select {
			case <-proc.exited:
			default:
				continue
			}
			if p.closed || proc.killed {
				continue
			}
			p.unexpected++
			fmt.Fprintf(p.o.logs, "lab chaos: worker %s exited by itself (%v); restarting it. Its last output:\n%s\n", proc.name, proc.cmd.ProcessState, p.lastOutput(proc))
			if err := p.spawnLocked(slot); err != nil {
				fmt.Fprintf(p.o.logs, "lab chaos: %v\n", err)
			}
		}
		p.mu.Unlock()
	}
}

// lastOutput returns the last 2,000 bytes a worker wrote to its log.
func (p *chaosPool) lastOutput(proc *chaosProc) string {
	tail, _ := os.ReadFile(filepath.Join(p.dir, "worker-"+proc.name+".err"))
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return string(tail)
}

// kill sends SIGKILL to the worker in slot, waits for it and starts a new
// one; it returns the name of the process killed.
func (p *chaosPool) kill(slot int) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proc := p.procs[slot]
	proc.killed = true
	_ = proc.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-proc.exited:
	case <-time.After(10 * time.Second):
		return proc.name, fmt.Errorf("worker %s did not exit within 10 s of SIGKILL", proc.name)
	}
	p.restarts++
	return proc.name, p.spawnLocked(slot)
}

// terminateLocked sends SIGTERM to proc and waits for it to exit, at most
// its Stop deadline plus slowStopSlack, then kills it; the caller holds p.mu.
func (p *chaosPool) terminateLocked(proc *chaosProc) {
	proc.killed = true
	began := time.Now()
	_ = proc.cmd.Process.Signal(syscall.SIGCONT)
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.exited:
	case <-time.After(p.o.stopTimeout + slowStopSlack):
		p.slowStops++
		_ = proc.cmd.Process.Kill()
		<-proc.exited
		fmt.Fprintf(p.o.logs, "lab chaos: worker %s had not stopped %s after SIGTERM (Stop deadline %s); killed it. Its last output:\n%s\n",
			proc.name, time.Since(began).Round(time.Millisecond), p.o.stopTimeout, p.lastOutput(proc))
	}
	p.maxStop = max(p.maxStop, time.Since(began))
}

// stop stops the worker in slot softly (SIGTERM), then starts a new one.
func (p *chaosPool) stop(slot int) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	proc := p.procs[slot]
	p.terminateLocked(proc)
	p.restarts++
	return proc.name, p.spawnLocked(slot)
}

// pause sends SIGSTOP to the worker in slot and SIGCONT after d, unless it
// was killed meanwhile; done is closed after the SIGCONT.
func (p *chaosPool) pause(slot int, d time.Duration) (name string, done chan struct{}) {
	p.mu.Lock()
	proc := p.procs[slot]
	p.mu.Unlock()
	done = make(chan struct{})
	_ = proc.cmd.Process.Signal(syscall.SIGSTOP)
	go func() {
		defer close(done)
		select {
		case <-time.After(d):
		case <-proc.exited:
		}
		_ = proc.cmd.Process.Signal(syscall.SIGCONT)
	}()
	return proc.name, done
}

// awaitClaim waits, at most wait, until the worker in slot records a claim
// in its audit log, polling every 2 ms, and reports whether it did.
func (p *chaosPool) awaitClaim(ctx context.Context, slot int, wait time.Duration) bool {
	return p.awaitRecord(ctx, slot, "C ", wait)
}

// awaitRecord waits, at most wait, until the worker in slot appends a
// record starting with prefix to its audit log, polling every 2 ms, and
// reports whether it did.
func (p *chaosPool) awaitRecord(ctx context.Context, slot int, prefix string, wait time.Duration) bool {
	p.mu.Lock()
	path := filepath.Join(p.dir, "audit-"+p.procs[slot].name+".log")
	p.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false
	}
	buf := make([]byte, 64*1024)
	for deadline := time.Now().Add(wait); time.Now().Before(deadline) && ctx.Err() == nil; {
		n, _ := f.ReadAt(buf, off)
		if n > 0 {
			chunk := buf[:n]
			// Only whole lines: one write() per record.
			if i := strings.LastIndexByte(string(chunk), '\n'); i >= 0 {
				lines := string(chunk[:i+1])
				if strings.HasPrefix(lines, prefix) || strings.Contains(lines, "\n"+prefix) {
					return true
				}
				off += int64(i + 1)
			}
			continue
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// slotOf returns the slot of the live process with the given name, or -1.
func (p *chaosPool) slotOf(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for slot, proc := range p.procs {
		if proc.name == name {
			return slot
		}
	}
	return -1
}

// stopAll stops every worker softly (SIGTERM), each as terminateLocked
// does; it may be called more than once.
func (p *chaosPool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	var wg sync.WaitGroup
	var mu sync.Mutex // terminateLocked's counters, from several goroutines
	for _, proc := range p.procs {
		if proc == nil {
			continue
		}
		wg.Go(func() {
			q := &chaosPool{o: p.o, dir: p.dir}
			q.terminateLocked(proc)
			mu.Lock()
			p.slowStops += q.slowStops
			p.maxStop = max(p.maxStop, q.maxStop)
			mu.Unlock()
		})
	}
	wg.Wait()
}

// runChaosRound runs the faults and the check on one backend, on a server
// and in a temporary directory of its own, both removed at the end.
func runChaosRound(ctx context.Context, o *chaosOptions, beName string) (round *chaosRound, err error) {
	dir, err := os.MkdirTemp("", "spool-chaos-"+beName+"-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.keepDir {
			fmt.Fprintf(o.logs, "lab chaos: %s: kept %s\n", beName, dir)
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	fmt.Fprintf(o.progress, "lab chaos: %s: starting in %s\n", beName, dir)
	var srv dbserver.Server
	var baseURL string
	switch beName {
	case "postgres":
		if o.failover != nil {
			s, err := dbserver.StartAutoFailover(ctx, dir, *o.failover)
			if err != nil {
				return nil, err
			}
			srv, baseURL = s, s.URL()
			break
		}
		s, err := dbserver.StartPostgres(ctx, dir)
		if err != nil {
			return nil, err
		}
		srv, baseURL = s, s.URL()
	case "mysql":
		s, err := dbserver.StartMariaDB(ctx, dir)
		if err != nil {
			return nil, err
		}
		srv, baseURL = s, s.URL()
	case "sqlite":
		baseURL = "sqlite://" + filepath.Join(dir, "chaos.db")
	}
	if srv != nil {
		defer func() {
			if serr := srv.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}()
	}
	scratch, err := stores.For(baseURL).NewScratch(baseURL)
	if err != nil {
		return nil, err
	}
	if o.claimCommit != "" && beName == "postgres" {
		if scratch.URL, err = bench.SetURLParam(scratch.URL, postgres.ClaimCommitParam, o.claimCommit); err != nil {
			return nil, err
		}
	}
	store, err := openChaosStore(ctx, scratch.URL)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer store.be.Close()
	prod := newChaosProducer(store.client)
	var plan *composePlan
	if o.compose.enabled() {
		fmt.Fprintf(o.progress, "lab chaos: %s: inserting the composed workloads\n", beName)
		if plan, err = insertCompose(ctx, store.client, prod, o.compose, o.seed); err != nil {
			return nil, err
		}
		ro := *o
		ro.debounceUntil = time.Now().Add(o.duration * 8 / 10)
		o = &ro
	}

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	pool := &chaosPool{self: self, url: scratch.URL, dir: dir, o: o, procs: make([]*chaosProc, o.workers), gens: make([]int, o.workers)}
	pool.mu.Lock()
	for slot := range o.workers {
		if err = pool.spawnLocked(slot); err != nil {
			break
		}
	}
	pool.mu.Unlock()
	defer pool.stopAll()
	if err != nil {
		return nil, err
	}
	superCtx, stopSupervisor := context.WithCancel(ctx)
	defer stopSupervisor()
	go pool.supervise(superCtx)

	round = &chaosRound{Backend: beName, Seed: o.seed, JobsTarget: o.jobs, Workers: o.workers, Concurrency: o.concurrency,
		LeaseMS: bench.MS(o.lease), WorkMS: bench.MS(o.work), Faults: map[string]int{}}
	start := time.Now()
	startChaosProducer(ctx, prod, o, start)
	var signals *signaller
	var sampler *debounceSampler
	stopSampler := func() {}
	if plan != nil {
		signals = startSignaller(ctx, store.client, plan.awaiting, o.duration*6/10, o.seed)
		if o.compose.debounceKeys > 0 {
			sctx, cancel := context.WithCancel(ctx)
			sampler = startDebounceSampler(sctx, store.client, 100*time.Millisecond)
			stopSampler = func() {
				cancel()
				<-sampler.done
			}
			defer stopSampler()
		}
	}
	var probe *writeProbe
	stopProbe := func() {}
	if o.failover != nil {
		probeCtx, cancel := context.WithCancel(ctx)
		probe = startWriteProbe(probeCtx, prod, 100*time.Millisecond)
		stopProbe = func() {
			cancel()
			<-probe.done
		}
		defer stopProbe()
	}
	bar := cli.StartProgress(o.progress, o.terminal, "chaos "+beName, "jobs inserted", int64(o.jobs), prod.ackedCount)
	faults, ferr := runChaosFaults(ctx, o, beName, srv, store, pool, prod, start)
	bar.Stop()
	round.FaultLog = faults
	stopProbe() // before the producer's lists are read
	for _, f := range faults {
		round.Faults[f.Kind]++
	}
	acked, unacked := prod.wait()
	if ferr != nil {
		return nil, ferr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	round.FaultSeconds = time.Since(start).Seconds()
	if probe != nil {
		round.WriteOutagesS = probe.outages(faults)
	}

	drainStart := time.Now()
	if signals != nil {
		<-signals.done // all sent, within the fault period
	}
	if err := waitChaosDrain(ctx, store.client, o.drain); err != nil {
		fmt.Fprintf(o.logs, "lab chaos: %s: %v\n", beName, err)
	}
	round.DrainSeconds = time.Since(drainStart).Seconds()
	stopSupervisor()
	pool.stopAll()
	pool.mu.Lock()
	round.WorkerRestarts, round.UnexpectedExits = pool.restarts, pool.unexpected
	round.SlowStops, round.MaxStopMS = pool.slowStops, bench.MS(pool.maxStop)
	pool.mu.Unlock()

	audit := &chaosAudit{Acked: acked, Unacked: unacked, Faults: faults, BusyUntil: prod.lastInsert}
	if err := readChaosStore(ctx, store, audit); err != nil {
		return nil, fmt.Errorf("read final state: %w", err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = readAudit(f, audit)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	round.chaosCheck = *checkChaos(audit)
	if plan != nil {
		stopSampler()
		in, err := readComposeInputs(ctx, store.client, plan)
		if err != nil {
			return nil, fmt.Errorf("read composed workloads: %w", err)
		}
		in.debounce = sampler
		signals.mu.Lock()
		in.signals = signals.sent
		signals.mu.Unlock()
		round.Compose = checkCompose(audit, in)
		round.Compose.SignalRetries = signals.failed
		round.Violations = append(round.Violations, round.Compose.Violations...)
	}
	if round.SlowStops > 0 {
		round.Violations = append(round.Violations, fmt.Sprintf("slow_stops=%d", round.SlowStops))
	}
	round.OK = round.chaosCheck.OK()
	return round, nil
}

// rescueErrorPrefix begins the error every store's rescue records for the
// attempt whose lease ran out.
const rescueErrorPrefix = "lease expired"

// readChaosStore reads every job row and effect row into a.
func readChaosStore(ctx context.Context, s *chaosStore, a *chaosAudit) error {
	var after int64
	for i := 0; i < 10_000; i++ {
		rows, err := s.be.JobList(ctx, &backend.JobListParams{AfterID: after, Limit: 5000})
		if err != nil {
			return err
		}
		for _, r := range rows {
			// Plain jobs' args (chaosArgs) always carry a seq; composed
			// jobs' (composeArgs) carry one when an insert acknowledged it.
			var args struct {
				Seq    *int64 `json:"seq"`
				Effect bool   `json:"effect"`
				Role   string `json:"role"`
			}
			if err := json.Unmarshal(r.Args, &args); err != nil {
				return fmt.Errorf("job %d: args: %w", r.ID, err)
			}
			j := chaosJob{ID: r.ID, State: r.State, Fence: r.Fence, FinalizedAt: r.FinalizedAt, Effect: args.Effect,
				Kind: r.Kind, BatchID: r.BatchID, Role: args.Role, Untracked: args.Seq == nil}
			if args.Seq != nil {
				j.Seq = *args.Seq
			}
			for _, e := range r.Errors {
				if strings.HasPrefix(e.Error, rescueErrorPrefix) {
					j.Rescues = append(j.Rescues, e.At)
				}
			}
			a.Jobs = append(a.Jobs, j)
			after = max(after, r.ID)
		}
		if len(rows) == 0 {
			effects, err := s.effects(ctx)
			a.Effects = effects
			return err
		}
	}
	return errors.New("more than 50 million jobs")
}

// chaosProducer inserts jobs over the fault period.
type chaosProducer struct {
	client  *spool.Client
	mu      sync.Mutex
	nextNeg int64 // the next sequence number of a fault's own jobs (negative)
	// lastInsert is when the producer's last insert returned.
	lastInsert time.Time
	acked      []int64
	unacked    []int64
	done       chan struct{}
}

func (p *chaosProducer) ackedCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.acked))
}

func (p *chaosProducer) wait() (acked, unacked []int64) {
	<-p.done
	return p.acked, p.unacked
}

// newChaosProducer returns a producer inserting with client.
func newChaosProducer(client *spool.Client) *chaosProducer {
	return &chaosProducer{client: client, done: make(chan struct{}), nextNeg: -1}
}

// startChaosProducer makes p insert o.jobs jobs, in a burst every second, spread
// over 90% of the fault period. A batch whose insert fails is not retried
// (it may have committed): its jobs are recorded as unacknowledged.
func startChaosProducer(ctx context.Context, p *chaosProducer, o *chaosOptions, start time.Time) {
	client := p.client
	go func() {
		defer close(p.done)
		rng := rand.New(rand.NewPCG(o.seed, 0x6a6f6273))
		const tick = time.Second // bursts: a backlog fills the prefetch buffers
		span := o.duration * 9 / 10
		seq := int64(0)
		deadline := start.Add(o.duration + o.drain)
		for seq < int64(o.jobs) && time.Now().Before(deadline) && ctx.Err() == nil {
			due := int64(float64(o.jobs) * float64(time.Since(start)+tick) / float64(span))
			n := min(max(due-seq, 0), int64(o.jobs)-seq, 2000)
			if n == 0 {
				time.Sleep(tick)
				continue
			}
			params := make([]spool.InsertManyParams, n)
			seqs := make([]int64, n)
			for i := range params {
				s := seq + int64(i)
				seqs[i] = s
				params[i] = spool.InsertManyParams{Args: chaosArgs{Seq: s, Effect: s%3 == 0, Fail: s%25 == 7, SleepMS: sleepMS(rng, o.work)}}
			}
			seq += n
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := client.InsertMany(ictx, params)
			cancel()
			p.mu.Lock()
			if err != nil {
				p.unacked = append(p.unacked, seqs...)
			} else {
				p.acked = append(p.acked, seqs...)
			}
			p.lastInsert = time.Now()
			p.mu.Unlock()
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
}

// stubbornSleep is how long a context-ignoring handler sleeps: past the
// point where a worker that waits for it is counted as a slow stop.
func stubbornSleep(o *chaosOptions) time.Duration {
	return o.stopTimeout + slowStopSlack + 2*time.Second
}

// slowStopSlack is how long after its Stop deadline a worker sent SIGTERM
// may take to exit before it counts as a slow stop.
const slowStopSlack = 2 * time.Second

// addStubborn inserts n jobs whose handler sleeps for d ignoring its
// context, with sequence numbers of their own (negative), acknowledged like
// the producer's.
func (p *chaosProducer) addStubborn(ctx context.Context, n int, d time.Duration) {
	_ = p.insertOwn(ctx, n, chaosArgs{Stubborn: true, SleepMS: int(d.Milliseconds())})
}

// insertOwn inserts n jobs like args with sequence numbers of their own
// (negative), acknowledged like the producer's, and returns the insert's
// error.
func (p *chaosProducer) insertOwn(ctx context.Context, n int, args chaosArgs) error {
	seqs := p.reserve(n)
	params := make([]spool.InsertManyParams, n)
	for i := range params {
		a := args
		a.Seq = seqs[i]
		params[i] = spool.InsertManyParams{Args: a}
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := p.client.InsertMany(ictx, params)
	cancel()
	p.ack(seqs, err)
	return err
}

// writeProbe inserts one job every interval and records when inserts
// succeeded, so that a write outage can be measured from the client's side.
type writeProbe struct {
	mu   sync.Mutex
	oks  []time.Time
	done chan struct{}
}

func startWriteProbe(ctx context.Context, p *chaosProducer, every time.Duration) *writeProbe {
	w := &writeProbe{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for ctx.Err() == nil {
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := p.insertOwn(ictx, 1, chaosArgs{SleepMS: 1})
			cancel()
			if err == nil {
				w.mu.Lock()
				w.oks = append(w.oks, time.Now())
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	return w
}

// outages returns, for each fault, the time from the fault to the first
// insert that succeeded after it (-1 if none did).
func (w *writeProbe) outages(faults []chaosFault) []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]float64, len(faults))
	for i, f := range faults {
		out[i] = -1
		j, _ := slices.BinarySearchFunc(w.oks, f.At, func(a, b time.Time) int { return a.Compare(b) })
		if j < len(w.oks) {
			out[i] = w.oks[j].Sub(f.At).Seconds()
		}
	}
	return out
}

// sleepMS draws a handler time uniformly from 10% to 190% of mean.
func sleepMS(rng *rand.Rand, mean time.Duration) int {
	lo := mean.Milliseconds() / 10
	return int(lo + rng.Int64N(2*(mean.Milliseconds()-lo)+1))
}

// runChaosFaults injects the scheduled faults until o.duration has passed,
// and returns what it did. A fault that cannot be injected (no leader yet)
// is skipped and not counted; a server that does not come back is an error.
func runChaosFaults(ctx context.Context, o *chaosOptions, beName string, srv dbserver.Server, store *chaosStore, pool *chaosPool, prod *chaosProducer, start time.Time) ([]chaosFault, error) {
	var faults []chaosFault
	var pauses []chan struct{}
	defer func() {
		for _, d := range pauses {
			<-d
		}
	}()
	note := func(f chaosFault) {
		faults = append(faults, f)
		fmt.Fprintf(o.progress, "\nlab chaos: %s: %6.1fs %s %s %s\n", beName, f.At.Sub(start).Seconds(), f.Kind, strings.Join(f.Procs, ","), f.Detail)
	}
	schedule := chaosSchedule(o.seed, beName, o.duration)
	if o.failover != nil {
		schedule = failoverSchedule(o.failovers, o.duration)
	}
	for _, pf := range schedule {
		if !sleepUntil(ctx, start.Add(pf.at)) {
			return faults, ctx.Err()
		}
		slot := pf.pick % o.workers
		at := time.Now()
		switch pf.kind {
		case "kill_worker":
			name, err := pool.kill(slot)
			if err != nil {
				return faults, err
			}
			note(chaosFault{Kind: pf.kind, At: at, Procs: []string{name}})
		case "kill_leader":
			// The leader row may still name a process killed a moment ago,
			// until its term ends: wait, a bounded time, for a live one.
			var leader string
			var err error
			s := -1
			for i := 0; i < 40 && s < 0 && ctx.Err() == nil; i++ {
				if i > 0 {
					time.Sleep(250 * time.Millisecond)
				}
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				leader, err = store.leader(lctx)
				cancel()
				s = pool.slotOf(leader)
			}
			if s < 0 {
				fmt.Fprintf(o.progress, "\nlab chaos: %s: no live leader to kill (%q, %v); skipped\n", beName, leader, err)
				continue
			}
			at = time.Now()
			name, err := pool.kill(s)
			if err != nil {
				return faults, err
			}
			note(chaosFault{Kind: pf.kind, At: at, Procs: []string{name}, Detail: "maintenance leader"})
		case "stop_worker":
			// Stop a worker while it runs a handler that ignores its
			// context for longer than the Stop deadline: jobs of that kind
			// go in now, and the SIGTERM waits (up to 5 s) until the worker
			// starts one.
			detail := "while it ran a handler that ignores its context"
			prod.addStubborn(ctx, 2*o.workers, stubbornSleep(o))
			if !pool.awaitRecord(ctx, slot, "X ", 5*time.Second) {
				detail = "no context-ignoring handler started in 5s"
			}
			at = time.Now()
			name, err := pool.stop(slot)
			if err != nil {
				return faults, err
			}
			note(chaosFault{Kind: pf.kind, At: at, Procs: []string{name}, Detail: fmt.Sprintf("%s; exited after %s", detail, time.Since(at).Round(time.Millisecond))})
		case "sigstop":
			// Pause the process right after a claim, when it holds jobs it
			// has not started yet (mid-claim, as the lead's issue puts it),
			// if one comes within 3 s.
			detail := "right after a claim"
			if !pool.awaitClaim(ctx, slot, 3*time.Second) {
				detail = "no claim seen in 3s"
			}
			at = time.Now()
			pause := 2 * o.lease
			name, done := pool.pause(slot, pause)
			pauses = append(pauses, done)
			note(chaosFault{Kind: pf.kind, At: at, Procs: []string{name}, Detail: detail + ", for " + pause.String()})
		case "conn_kill":
			kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := store.killConn(kctx)
			cancel()
			if err != nil {
				fmt.Fprintf(o.progress, "\nlab chaos: %s: connection kill failed: %v; skipped\n", beName, err)
				continue
			}
			note(chaosFault{Kind: pf.kind, At: at, Detail: fmt.Sprintf("%d connections", n)})
		case "restart_failover":
			// The fault is the kill, which comes once the formation is
			// ready for it (its standby synchronous again).
			af, ok := srv.(*dbserver.AutoFailover)
			if !ok {
				return faults, fmt.Errorf("failover needs a pg_auto_failover formation, not %T", srv)
			}
			killed, err := af.Failover(ctx)
			if err != nil {
				return faults, err
			}
			note(chaosFault{Kind: pf.kind, At: killed, Detail: fmt.Sprintf("primary's node killed; standby promoted after %.1fs", time.Since(killed).Seconds())})
		default: // restart_<mode>
			mode := strings.TrimPrefix(pf.kind, "restart_")
			if err := srv.Restart(ctx, mode); err != nil {
				return faults, err
			}
			note(chaosFault{Kind: pf.kind, At: at, Detail: fmt.Sprintf("back after %.1fs", time.Since(at).Seconds())})
		}
	}
	sleepUntil(ctx, start.Add(o.duration))
	return faults, ctx.Err()
}

// sleepUntil waits until t or ctx, reporting whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitChaosDrain waits until no job of any queue is waiting, pending or
// running, for at most limit.
func waitChaosDrain(ctx context.Context, client *spool.Client, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last []backend.QueueStats
	for time.Now().Before(deadline) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		all, err := client.QueueStats(qctx)
		cancel()
		if err == nil {
			last = all
			left := int64(0)
			for _, st := range all {
				left += bench.PendingCount(st) + st.Counts[backend.StateWaiting]
			}
			if left == 0 {
				return nil
			}
		}
		if !sleepUntil(ctx, time.Now().Add(250*time.Millisecond)) {
			return ctx.Err()
		}
	}
	counts := make([]string, len(last))
	for i, st := range last {
		counts[i] = st.Queue + ": " + bench.FormatCounts(st)
	}
	return fmt.Errorf("queues not drained after %s: %s", limit, strings.Join(counts, "; "))
}

// printChaos prints each round's counts, invariants and recovery times.
func printChaos(w io.Writer, r *chaosResult) error {
	for _, rd := range r.Rounds {
		fmt.Fprintf(w, "chaos on %s: %d processes × %d workers, lease %s, %.0f s of faults, drained in %.1f s, seed %d\n",
			rd.Backend, rd.Workers, rd.Concurrency, time.Duration(rd.LeaseMS*float64(time.Millisecond)), rd.FaultSeconds, rd.DrainSeconds, rd.Seed)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "enqueued\tcompleted\tdiscarded\tpending\tlost\tunacked inserts committed\tstarts\trun twice\tworker restarts\tlongest start gap ms\t\n")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t\n", rd.Enqueued, rd.Completed, rd.Discarded, rd.Pending, rd.Lost,
			rd.CommittedUnacked, rd.Starts, rd.JobsRunTwice, rd.WorkerRestarts, rd.LongestStartGapMS)
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "invariant\tcount\t\n")
		printInvariants(tw, append(rd.invariants(), namedCount{"slow_stops", int64(rd.SlowStops)}))
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := printChaosRecovery(w, &rd); err != nil {
			return err
		}
		if rd.LateByClaimLiveInDB > 0 {
			fmt.Fprintf(w, "  %d starts came after their claim's lease end, within a lease the database had extended (not late)\n", rd.LateByClaimLiveInDB)
		}
		for _, e := range rd.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
		if rd.UnexpectedExits > 0 {
			fmt.Fprintf(w, "  %d worker processes exited by themselves (see stderr)\n", rd.UnexpectedExits)
		}
		fmt.Fprintln(w)
		if rd.Compose != nil {
			if err := printCompose(w, rd.Compose); err != nil {
				return err
			}
		}
	}
	if r.OK {
		fmt.Fprintln(w, "all invariants held")
	}
	return nil
}

// recoveryTargetMS is what the recovery of a job a fault interrupted
// should take at most, at the 99th percentile: twice the lease plus the
// rescue interval (the workers' default, a third of the lease).
func recoveryTargetMS(leaseMS float64) float64 { return 2 * (leaseMS + leaseMS/3) }

// printChaosRecovery prints one round's recovery table: per fault kind, the
// time from the fault to the rescue of the jobs it interrupted, from the
// rescue to their claim, from the claim to their start, and from the fault
// to their start (p50 / p99 / max, ms).
func printChaosRecovery(w io.Writer, rd *chaosRound) error {
	target := recoveryTargetMS(rd.LeaseMS)
	fmt.Fprintf(w, "recovery of the jobs each fault interrupted, ms, p50 / p99 / max (target: p99 of fault → running again ≤ %.0f)\n", target)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "fault\tcount\tjobs\tfault → rescue\trescue → claim\tclaim → start\tfault → running again\t\tfirst start anywhere\t\n")
	for _, k := range sortedKinds(rd.Recovery) {
		s := rd.Recovery[k]
		mark := ""
		if s.Jobs > 0 && s.P99MS > target {
			mark = "over"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", k, s.Faults, s.Jobs, phaseCell(s.FaultToRescue), phaseCell(s.RescueToClaim),
			phaseCell(s.ClaimToStart), phaseCell(phaseStats{Jobs: s.Jobs, P50MS: s.P50MS, P99MS: s.P99MS, MaxMS: s.MaxMS}), mark, s.FirstStartMS)
	}
	return tw.Flush()
}

// sortedKinds returns the fault kinds of a recovery map in order.
func sortedKinds(m map[string]recoveryStats) []string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// phaseCell formats a phase as "p50 / p99 / max (jobs)", or "—" when no
// job went through it.
func phaseCell(p phaseStats) string {
	if p.Jobs == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s (%d)", thousands(p.P50MS), thousands(p.P99MS), thousands(p.MaxMS), p.Jobs)
}

// thousands formats a non-negative number rounded to an integer, with commas
// between thousands.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// printChaosMarkdown prints the rounds as the markdown tables of
// docs/guarantees.md's "Latest long run": the counts and invariants with a
// column per backend, then the recovery of each fault kind per backend.
func printChaosMarkdown(w io.Writer, r *chaosResult) error {
	if len(r.Rounds) == 0 {
		return nil
	}
	rd0 := r.Rounds[0]
	fmt.Fprintf(w, "%d worker processes × %d workers, lease %s, handlers of %s mean, %.0f s of faults per backend, seed %d.\n\n",
		rd0.Workers, rd0.Concurrency, time.Duration(rd0.LeaseMS*float64(time.Millisecond)), time.Duration(rd0.WorkMS*float64(time.Millisecond)), rd0.FaultSeconds, rd0.Seed)
	header := func(title string) {
		fmt.Fprintf(w, "|%s|", strings.TrimRight(" "+title, " ")+" ")
		for _, rd := range r.Rounds {
			fmt.Fprintf(w, " %s |", rd.Backend)
		}
		fmt.Fprint(w, "\n|---|")
		for range r.Rounds {
			fmt.Fprint(w, "---:|")
		}
		fmt.Fprintln(w)
	}
	header("")
	row := func(name string, cell func(rd *chaosRound) string) {
		fmt.Fprintf(w, "| %s |", name)
		for i := range r.Rounds {
			fmt.Fprintf(w, " %s |", cell(&r.Rounds[i]))
		}
		fmt.Fprintln(w)
	}
	n := func(f func(rd *chaosRound) int64) func(rd *chaosRound) string {
		return func(rd *chaosRound) string { return thousands(float64(f(rd))) }
	}
	row("faults injected", n(func(rd *chaosRound) int64 { return int64(len(rd.FaultLog)) }))
	row("enqueued", n(func(rd *chaosRound) int64 { return rd.Enqueued }))
	row("completed", n(func(rd *chaosRound) int64 { return rd.Completed }))
	row("discarded", n(func(rd *chaosRound) int64 { return rd.Discarded }))
	row("pending after drain", n(func(rd *chaosRound) int64 { return rd.Pending }))
	row("lost", n(func(rd *chaosRound) int64 { return rd.Lost }))
	row("runs after committed completion", n(func(rd *chaosRound) int64 { return rd.RunsAfterCommittedCompletion }))
	row("stale completions accepted", n(func(rd *chaosRound) int64 { return rd.StaleCompletionsAccepted }))
	row("overlapping live leases", n(func(rd *chaosRound) int64 { return rd.OverlappingLiveLeases }))
	row("late starts", n(func(rd *chaosRound) int64 { return rd.LateStarts }))
	row("duplicate effects", n(func(rd *chaosRound) int64 { return rd.DuplicateEffects }))
	row("missing effects", n(func(rd *chaosRound) int64 { return rd.MissingEffects }))
	row("slow stops", n(func(rd *chaosRound) int64 { return int64(rd.SlowStops) }))
	row("unacknowledged inserts that committed", n(func(rd *chaosRound) int64 { return rd.CommittedUnacked }))
	row("handler starts", n(func(rd *chaosRound) int64 { return rd.Starts }))
	row("jobs started more than once", n(func(rd *chaosRound) int64 { return rd.JobsRunTwice }))
	row("worker processes replaced", n(func(rd *chaosRound) int64 { return int64(rd.WorkerRestarts) }))
	row("drain after the faults (s)", func(rd *chaosRound) string { return strconv.FormatFloat(rd.DrainSeconds, 'f', 1, 64) })
	row("longest time without a start (ms)", func(rd *chaosRound) string { return thousands(rd.LongestStartGapMS) })
	row("longest SIGTERM → exit (ms)", func(rd *chaosRound) string { return thousands(rd.MaxStopMS) })
	row("invariants", func(rd *chaosRound) string {
		if rd.OK {
			return "held"
		}
		return "**violated: " + strings.Join(rd.Violations, ", ") + "**"
	})

	if rd0.Compose != nil {
		fmt.Fprintln(w)
		header("composed workloads")
		for i, cr := range rd0.Compose.rows() {
			row(cr.name, func(rd *chaosRound) string {
				if rd.Compose == nil {
					return "—"
				}
				return rd.Compose.rows()[i].value
			})
		}
		for i, v := range rd0.Compose.invariants() {
			row(strings.ReplaceAll(v.name, "_", " "), func(rd *chaosRound) string {
				if rd.Compose == nil {
					return "—"
				}
				return thousands(float64(rd.Compose.invariants()[i].n))
			})
		}
	}
	fmt.Fprintf(w, "\nRecovery of the jobs each fault interrupted (held by the process it hit, claimed or running), ms: p50 / p99 / max (jobs). "+
		"Fault → rescue and rescue → claim count the jobs whose lease ran out and rescue returned; claim → start and fault → running again count them all. "+
		"Target: p99 of fault → running again ≤ 2 × (lease + rescue interval) = %s ms.\n\n", thousands(recoveryTargetMS(rd0.LeaseMS)))
	fmt.Fprintln(w, "| backend | fault | faults | fault → rescue | rescue → claim | claim → start | fault → running again |")
	fmt.Fprintln(w, "|---|---|---:|---|---|---|---|")
	for _, rd := range r.Rounds {
		for _, k := range sortedKinds(rd.Recovery) {
			s := rd.Recovery[k]
			total := phaseCell(phaseStats{Jobs: s.Jobs, P50MS: s.P50MS, P99MS: s.P99MS, MaxMS: s.MaxMS})
			if s.Jobs > 0 && s.P99MS > recoveryTargetMS(rd.LeaseMS) {
				total = "**" + total + "**"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", rd.Backend, k, s.Faults,
				phaseCell(s.FaultToRescue), phaseCell(s.RescueToClaim), phaseCell(s.ClaimToStart), total)
		}
	}
	return nil
}

// Usage implements cli.Command.
func (c *BenchChaosCommand) Usage() string {
	return `Usage: lab chaos [flags]

Runs worker processes of this binary (each a spool.Client) against a store
while it injects faults on a seeded schedule: kill -9 of a random worker and
of the maintenance leader, SIGSTOP of a worker right after a claim for twice
the lease, SIGTERM (a soft stop with a 2 s deadline) while the worker runs a
handler that ignores its context, for
PostgreSQL and MariaDB connection kills and server restarts (PostgreSQL in
pg_ctl's fast and immediate shutdown modes; a clean MariaDB restart and
kill -9 and restart).
Killed workers are restarted; a producer inserts jobs throughout. After the
faults the queue drains and a checker reads every worker's audit log (each
handler start and return, written with one write() so that kill -9 cannot
lose it) and the final rows, and counts breaches of docs/guarantees.md:

	lost                             acknowledged jobs not completed, discarded or pending
	runs_after_committed_completion  a handler start after the job's completion committed
	stale_completions_accepted       an effect row under a fence not the job's final one
	overlapping_live_leases          two claims of one job live at once
	late_starts                      a start (spool.JobStartedAt: the engine's last lease
	                                 check) at or after its claim's lease end
	duplicate_effects                more than one effect row (CompleteTx) for a job
	missing_effects                  a CompleteTx job completed without its effect row
	slow_stops                       a worker sent SIGTERM still running 2 s after its Stop deadline

It exits non-zero when any is not zero. PostgreSQL (initdb and pg_ctl from
` + dbserver.PGBinDir + `) and MariaDB (mariadb-install-db, mariadbd) run on
servers of its own, on free loopback ports in a temporary directory, never
on a shared server; SQLite runs the worker processes on one file. Servers
and directories are removed at the end.

Flags:

	--backend postgres|mysql|sqlite|all
		the stores to run on, one after the other (default all)
	--duration DURATION
		how long faults are injected per backend (default 3m)
	--jobs N
		jobs inserted over the fault period, per backend (default 50000)
	--workers N
		worker processes (default 4)
	--concurrency N
		workers per process (default 4)
	--work DURATION
		mean handler time, drawn from 10% to 190% of it (default 40ms)
	--lease DURATION
		the workers' LeaseDuration (default 3s)
	--seed N
		seed of the fault schedule and the jobs (default 1)
	--claim-commit sync|async
		PostgreSQL: the workers' spool_claim_commit (default: sync); with
		async a server restart can undo the last claims, which the
		checker then counts as overlapping live leases (promise 3)
	--drain-timeout DURATION
		how long the queue may take to drain after the faults (default 2m)
	--workflow-tasks N, --batches N, --batch-size N, --many-jobs N,
	--step-jobs N, --debounce-keys N
		composed workloads, inserted before the faults and run beside
		the plain jobs on the same processes, in a queue of their own
		(default none): a workflow of N tasks (a root, 20 layers, each
		task after 1 to 3 of the layer before, a fan-in; a few tasks
		discarded, their dependents cancelled or run by their policy);
		N batches of --batch-size members (default 20) with success,
		failure and completion callbacks; N jobs of a many-worker
		(spool.AddManyWorker, up to 12 a call, completing with
		CompleteManyTx and an effect row each); N jobs of five durable
		steps, half with a Sleep, half with an AwaitSignal the driver
		answers at random moments (some before the wait); and debounced
		inserts of N keys from every worker process. The checker then
		also counts:

	starts_before_dependencies  a task or callback start not after the committed final
	                            state of every job it waits for (or after one that did
	                            not complete, for a task after it by the default policy)
	wrong_final_states          a job not ended as planned (a task's end follows from
	                            its dependencies' and its policy)
	left_waiting                a composed job not final after the drain
	batches_not_finished        a batch not final, or its counts wrong
	callbacks_missing           a callback whose condition held, not completed
	callbacks_unexpected        a callback whose condition did not hold, still there
	callbacks_twice             two callbacks of one batch and condition
	callbacks_saw_unfinished_batch  a callback that read its batch unfinished
	step_reruns_after_record    a step function run in an attempt after the one whose
	                            record committed
	steps_without_record        a step of a completed job with no record
	signal_timeouts             a signal wait that timed out (the timeout is 30 min)
	signal_payloads_wrong       a signal wait that returned another job's payload
	debounce_two_pending_from_inserts
	                            a sample (every 100 ms, one statement) in which a key
	                            had two pending jobs that never ran

	--json
		print only a JSON object with the results on stdout
	--markdown
		print the results as markdown tables (docs/guarantees.md's)
	--quiet
		draw no progress on stderr
	--timeout DURATION
		give up after this long (default 0: no limit)
	--keep-dir
		keep the temporary directory: audit logs (audit-<process>.log),
		worker and server logs, the SQLite file
`
}
