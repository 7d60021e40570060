package scenarios

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
	"github.com/spoolq/spool/cmd/spool/stores"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/netns"
)

func init() {
	registerBenchScenario("hosts", "worker processes on 1, 2, 4 and 8 simulated hosts against one server: drain, pickup, connections, server CPU",
		func(m *cli.Env) cli.Command { return &BenchHostsCommand{m: m} })
}

// BenchHostsCommand runs worker processes, each in a network namespace of
// its own joined to a database server of the bench's own by veth (a host
// simulated on this machine), and measures, for each number of processes,
// the drain rate, pickup latency, the connections each process holds and
// the server's CPU per job.
type BenchHostsCommand struct{ m *cli.Env }

// hostsResult is the outcome of lab hosts, as printed with --json.
type hostsResult struct {
	Scenario        string `json:"scenario"`
	Server          string `json:"server"`
	Durable         bool   `json:"durable"`
	CPUs            int    `json:"cpus"`
	Jobs            int    `json:"jobs"`
	Workers         int    `json:"workers_per_process"`
	Prefetch        int    `json:"prefetch"`
	Batch           int    `json:"batch"`
	DeleteCompleted bool   `json:"delete_completed"`
	Strategy        string `json:"strategy,omitempty"`
	ClaimLock       string `json:"claim_lock,omitempty"`
	WakeRouting     string `json:"wake_routing,omitempty"`
	// ServerCPUs and WorkerCPUs are the CPUs the server and the worker
	// processes were pinned to (--pin), empty when they shared them all.
	ServerCPUs    string      `json:"server_cpus,omitempty"`
	WorkerCPUs    string      `json:"worker_cpus,omitempty"`
	Rounds        int         `json:"rounds"`
	Rate          float64     `json:"pickup_rate"`
	PickupSeconds float64     `json:"pickup_seconds"`
	Steps         []hostsStep `json:"steps"`
}

// hostsStep is one number of worker processes: over several rounds, each
// figure is the median of the rounds' (the connections, the most; pickup
// jobs, duplicate starts and claims, the sums).
type hostsStep struct {
	Processes int `json:"processes"`
	// DrainRuns are the rounds' drain rates, in the order they ran.
	DrainRuns     []float64 `json:"drain_runs_jobs_per_s"`
	DrainSeconds  float64   `json:"drain_seconds"`
	DrainJobsPerS float64   `json:"drain_jobs_per_s"`
	// ClientCPUPerJobUS is the worker processes' CPU time during the drain
	// per job; ServerCPUPerJobUS the server's (its processes only).
	ClientCPUPerJobUS float64 `json:"client_cpu_per_job_us"`
	ServerCPUPerJobUS float64 `json:"server_cpu_per_job_us"`
	// ServerFaultsPerJob is the server's minor page faults during the drain
	// per job: each connection's backend faults in the shared memory it
	// touches for the first time, which some virtual machines make costly.
	ServerFaultsPerJob float64 `json:"server_faults_per_job"`
	// Warm is the second drain of the step, by the same processes on the
	// same connections (--warm): what the drain costs once every backend
	// has mapped the shared memory it touches, nil without --warm.
	Warm *hostsDrain `json:"warm,omitempty"`
	// FaultProbeUS is what a minor page fault cost this machine before
	// the step's drain (hostsFaultProbe): on a virtual machine whose
	// speed moves, the figure that says which state the guest was in.
	FaultProbeUS float64 `json:"fault_probe_us"`
	// ServerCPUShare is the server's CPU time over the drain's wall time
	// and the CPUs it may use (all, or the one it is pinned to): near 1, the
	// server is what limits the drain.
	ServerCPUShare float64 `json:"server_cpu_share"`
	// Connections is the most connections the server saw at once from each
	// process's host during the drain, by host.
	Connections []int              `json:"connections_per_process"`
	Pickup      bench.LatencyStats `json:"pickup_latency"`
	// PickupServerCPUPerJobUS is the server's CPU time during the pickup
	// phase per job inserted: at a modest rate, mostly what idle processes
	// cost it (their polls and wake-up claims).
	PickupServerCPUPerJobUS float64 `json:"pickup_server_cpu_per_job_us"`
	// PickupServerFaultsPerJob is the server's minor page faults during the
	// pickup phase per job inserted.
	PickupServerFaultsPerJob float64 `json:"pickup_server_faults_per_job"`
	// DrainClaims and PickupClaims count the workers' claim calls in each
	// phase; the Empty ones found no job (a wake-up another process
	// answered first, or a poll).
	DrainClaims      int64 `json:"drain_claims"`
	DrainEmptyClaims int64 `json:"drain_empty_claims"`
	// DrainFinishes counts the outcome writes of the drain; DrainClaimMS
	// and DrainFinishMS the time the workers spent waiting on claims and
	// on outcome writes (summed over processes, in milliseconds).
	DrainFinishes     int64   `json:"drain_finishes"`
	DrainClaimMS      float64 `json:"drain_claim_ms"`
	DrainFinishMS     float64 `json:"drain_finish_ms"`
	PickupClaims      int64   `json:"pickup_claims"`
	PickupEmptyClaims int64   `json:"pickup_empty_claims"`
	PickupJobs        int64   `json:"pickup_jobs"`
	// IdleServerCPUShare is the server's CPU share while the processes
	// had nothing to do.
	IdleServerCPUShare float64 `json:"idle_server_cpu_share"`
	Duplicates         int64   `json:"pickup_duplicate_starts"`
	// PickupJobsPerS is the rate the pickup phase inserted at: below the
	// rate asked for, the inserting goroutines were starved of CPU and the
	// phase's figures are of a lighter load.
	PickupJobsPerS float64 `json:"pickup_jobs_per_s"`
	// ProbeServerUS is the server's CPU time a `SELECT 1` round trip,
	// measured before the step's drain (hostsEnv.probe): how fast the
	// machine ran the server then.
	ProbeServerUS float64 `json:"probe_server_us"`
}

// hostsDrain is the figures of a warm drain (hostsStep.Warm): the same as
// the step's own, for the second drain of its processes.
type hostsDrain struct {
	DrainRuns          []float64 `json:"drain_runs_jobs_per_s"`
	DrainJobsPerS      float64   `json:"drain_jobs_per_s"`
	ServerCPUPerJobUS  float64   `json:"server_cpu_per_job_us"`
	ServerFaultsPerJob float64   `json:"server_faults_per_job"`
	ServerCPUShare     float64   `json:"server_cpu_share"`
	ClientCPUPerJobUS  float64   `json:"client_cpu_per_job_us"`
	// NewConnections is how many connections the processes opened during
	// the warm drain, all hosts together: the pools' growth and churn.
	NewConnections int `json:"new_connections"`
}

// Run implements cli.Command.
func (c *BenchHostsCommand) Run(ctx context.Context, args []string) error {
	r := bench.NewScenarioRun(c.m, "hosts")
	worker := r.Flags.Bool("worker", false, "run as one worker process (started by lab hosts itself)")
	server := r.Flags.String("server", "postgres", "server to start: postgres or mariadb")
	hostList := r.Flags.String("hosts", "1,2,4,8", "numbers of worker processes, one host each")
	jobs := r.Flags.Int("jobs", 100000, "jobs drained at each number of processes")
	rate := r.Flags.Float64("rate", 1000, "jobs inserted per second in the pickup phase")
	pickupFor := r.Flags.Duration("pickup-duration", 10*time.Second, "length of the pickup phase")
	producers := r.Flags.Int("producers", 4, "inserting goroutines of the pickup phase")
	idleFor := r.Flags.Duration("idle-duration", 5*time.Second, "length of the idle phase, measured after 3 s with nothing inserted (0 skips it)")
	rounds := r.Flags.Int("rounds", 1, "times to run the whole list, alternating its order; medians are reported")
	pin := r.Flags.Bool("pin", false, "run the server on CPU 0 and the worker processes (and this one) on the others")
	strategy := r.Flags.String("strategy", "", "claim strategy of the workers: pessimistic or optimistic (default: the backend's)")
	claimLock := r.Flags.String("claim-lock", "", "the workers' spool_claim_lock: queue or off (default: the backend's, queue)")
	wakeRouting := r.Flags.String("wake-routing", "", "the workers' spool_wake_routing: looker (MariaDB), on or off (default: the backend's)")
	statements := r.Flags.String("statements", "", "append each phase's statements, per job, to this file (PostgreSQL: pg_stat_statements; MariaDB: global status counters)")
	warm := r.Flags.Bool("warm", true, "after each drain, drain --jobs more with the same processes and connections, reported apart")
	poolMax := r.Flags.Int("pool-max-conns", 0, "PostgreSQL: each worker process's pool_max_conns (0: the backend's default)")
	hugePages := r.Flags.Bool("huge-pages", false, "PostgreSQL: start the server with huge_pages = on (reserve them first: sysctl vm.nr_hugepages)")
	started := r.Flags.Duration("started", 0, "start the worker processes this long before the drain, on the paused queue, and time the drain from its resume (0: from their start)")
	q := r.AddQueueFlags(bench.DefaultPrefetch)
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if *worker {
		if err := r.Check(q.Checks()...); err != nil {
			return err
		}
		return runHostsWorker(ctx, c.m.Stdin, c.m.Stdout, *r.Common.DBURL, q)
	}
	counts, listErr := bench.ParseCountList(*hostList)
	checks := []bench.Check{
		bench.Want(*server == "postgres" || *server == "mariadb", "--server must be postgres or mariadb"),
		bench.Want(listErr == nil, "--hosts: %v", listErr),
		bench.Want(listErr != nil || slices.Max(counts) <= 64, "--hosts: at most 64 processes"),
		bench.Want(*jobs >= 1, "--jobs must be at least 1"),
		bench.Want(*rate > 0 && *rate <= 1e6, "--rate must be above 0 and at most 1000000"),
		bench.Want(*pickupFor >= 0, "--pickup-duration must not be negative"),
		bench.Want(*idleFor >= 0, "--idle-duration must not be negative"),
		bench.Want(*started >= 0, "--started must not be negative"),
		bench.Want(*poolMax >= 0 && *poolMax <= 1000, "--pool-max-conns must be between 0 and 1000"),
		bench.Want(*poolMax == 0 || *server == "postgres", "--pool-max-conns is PostgreSQL's"),
		bench.Want(!*hugePages || *server == "postgres", "--huge-pages is PostgreSQL's"),
		bench.Want(*producers >= 1 && *producers <= 1000, "--producers must be between 1 and 1000"),
		bench.Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"),
		bench.Want(*strategy == "" || *strategy == "pessimistic" || *strategy == "optimistic", "--strategy must be pessimistic or optimistic"),
		bench.Want(*claimLock == "" || *claimLock == "queue" || *claimLock == "off", "--claim-lock must be queue or off"),
		bench.Want(*wakeRouting == "" || *wakeRouting == "looker" || *wakeRouting == "on" || *wakeRouting == "off", "--wake-routing must be looker, on or off"),
		bench.Want(*r.Common.DBURL == "", "--database-url is not used: lab hosts starts a server of its own"),
		bench.Want(*r.Common.CPUProfile == "", "--cpuprofile is not offered: the work runs in the worker processes"),
		bench.Want(os.Geteuid() == 0, "lab hosts needs root (it creates network namespaces)"),
		bench.Want(!*pin || runtime.NumCPU() >= 2, "--pin needs at least 2 CPUs"),
	}
	if err := r.Check(append(checks, q.Checks()...)...); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()

	res := hostsResult{Scenario: "hosts", Server: *server, Durable: true, CPUs: runtime.NumCPU(), Jobs: *jobs,
		Workers: *q.Workers, Prefetch: *q.Prefetch, Batch: *q.Batch, DeleteCompleted: *q.DeleteCompleted,
		Strategy: *strategy, ClaimLock: *claimLock, WakeRouting: *wakeRouting, Rounds: *rounds, Rate: *rate, PickupSeconds: pickupFor.Seconds()}
	if *pin {
		res.ServerCPUs, res.WorkerCPUs = "0", "1"
		if n := runtime.NumCPU(); n > 2 {
			res.WorkerCPUs = "1-" + strconv.Itoa(n-1)
		}
	}
	env, err := startHostsEnv(ctx, *server, int(slices.Max(counts)), r.Stderr, *r.Common.Keep, res.ServerCPUs, res.WorkerCPUs, *statements, *hugePages)
	if err != nil {
		return fmt.Errorf("lab hosts: %w", err)
	}
	r.AtEnd(func() {
		if err := env.close(); err != nil {
			fmt.Fprintf(r.Env.Stderr, "lab: hosts: %v\n", err)
		}
	})
	env.load = hostsLoad{
		workerArgs: []string{"hosts", "--worker", "--workers", strconv.Itoa(*q.Workers),
			"--prefetch", strconv.Itoa(*q.Prefetch), "--batch", strconv.Itoa(*q.Batch),
			"--completion-delay", q.Delay.String(), "--delete-completed=" + strconv.FormatBool(*q.DeleteCompleted)},
		strategy: *strategy, claimLock: *claimLock, wakeRouting: *wakeRouting, jobs: *jobs, chunk: *q.Chunk, deleteCompleted: *q.DeleteCompleted,
		started: *started, warm: *warm, poolMaxConns: *poolMax,
	}
	// A fresh server allocates its WAL or redo files and fills its caches
	// during its first drains: one unreported drain with one process
	// warms it, so the first measured count is not penalised.
	fmt.Fprintf(r.Common.ProgressWriter(r.Stderr), "lab hosts: %s, warming up\n", *server)
	if _, err := env.runStep(ctx, r, 1, hostsPickup{}); err != nil {
		return fmt.Errorf("lab hosts: warm-up: %w", bench.WithCause(ctx, err))
	}
	runs := map[int][]hostsStep{}
	for round := range *rounds {
		order := slices.Clone(counts)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			fmt.Fprintf(r.Common.ProgressWriter(r.Stderr), "lab hosts: %s, round %d of %d, %d worker processes\n", *server, round+1, *rounds, n)
			env.round = round + 1
			step, err := env.runStep(ctx, r, int(n), hostsPickup{rate: *rate, producers: *producers, d: *pickupFor, idle: *idleFor})
			if err != nil {
				return fmt.Errorf("lab hosts: %d processes: %w", n, bench.WithCause(ctx, err))
			}
			runs[int(n)] = append(runs[int(n)], *step)
		}
	}
	for _, n := range counts {
		if steps := runs[int(n)]; steps != nil {
			res.Steps = append(res.Steps, medianStep(steps))
			delete(runs, int(n)) // a count listed twice is reported once
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printHosts(w, &res) }, func() *plot.Figure { return hostsFigure(&res) })
}

// hostsEnv is the simulated hosts and the server they reach.
type hostsEnv struct {
	hosts   *netns.Hosts
	server  interface{ PID() int }
	stop    func() error
	baseURL string // the server's URL on 127.0.0.1
	kind    string // "postgres" or "mariadb"
	port    int
	dir     string
	keepDir bool
	self    string
	load    hostsLoad
	// workerCPUs, when set, is the CPU list the workers run on (taskset).
	workerCPUs string
	serverCPUs int // the CPUs the server may use
	stderr     io.Writer
	// statements, when set, is the file each phase's statements are
	// appended to (--statements); round is the round running, 0 for the
	// warm-up, which writes none.
	statements string
	round      int
	// status counts MariaDB's statements and InnoDB's work by its global
	// status (--statements on MariaDB), nil on PostgreSQL.
	status *mariaStatus
}

// startHostsEnv creates the hosts and starts the server, durable as a
// default installation, listening on the bridge.
func startHostsEnv(ctx context.Context, server string, hosts int, stderr io.Writer, keep bool, serverCPUs, workerCPUs, statements string, hugePages bool) (e *hostsEnv, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "spool-hosts-")
	if err != nil {
		return nil, err
	}
	e = &hostsEnv{dir: dir, keepDir: keep, self: self, stderr: stderr, workerCPUs: workerCPUs, serverCPUs: runtime.NumCPU(), statements: statements, kind: server}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	if e.hosts, err = netns.Create(ctx, hosts); err != nil {
		return nil, err
	}
	opts := dbserver.Options{Listen: e.hosts.ServerAddr(), TrustNet: e.hosts.Network(), Durable: true}
	if statements != "" && server == "postgres" {
		opts.Settings = []string{"shared_preload_libraries = 'pg_stat_statements'", "pg_stat_statements.track_planning = on"}
	}
	if hugePages {
		// Shared memory in 2 MB pages: a new backend then maps it in a few
		// hundred faults instead of one per 4 kB page it touches. With on
		// (not try) the server refuses to start without them reserved.
		opts.Settings = append(opts.Settings, "huge_pages = on")
	}
	switch server {
	case "postgres":
		s, err := dbserver.StartPostgresWith(ctx, dir, opts)
		if err != nil {
			return nil, err
		}
		e.server, e.stop, e.baseURL = s, s.Stop, s.URL()
	default:
		s, err := dbserver.StartMariaDBWith(ctx, dir, opts)
		if err != nil {
			return nil, err
		}
		e.server, e.stop, e.baseURL = s, s.Stop, s.URL()
		if statements != "" {
			if e.status, err = openMariaStatus(ctx, s.URL()); err != nil {
				return nil, fmt.Errorf("--statements: %w", err)
			}
		}
	}
	if serverCPUs != "" {
		if err := pinHosts(ctx, os.Getpid(), e.server.PID(), workerCPUs, serverCPUs); err != nil {
			return nil, err
		}
		e.serverCPUs = 1
	}
	u, err := url.Parse(e.baseURL)
	if err != nil {
		return nil, err
	}
	if e.port, err = strconv.Atoi(u.Port()); err != nil {
		return nil, fmt.Errorf("server URL %s: %w", e.baseURL, err)
	}
	if statements != "" && server == "postgres" {
		if err := e.statementsExec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
	}
	return e, nil
}

// statementsExec runs sql on the server's database (--statements).
func (e *hostsEnv) statementsExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, e.baseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// resetStatements empties pg_stat_statements before a phase (--statements).
func (e *hostsEnv) resetStatements(ctx context.Context) error {
	if e.statements == "" {
		return nil
	}
	if e.status != nil {
		return e.status.reset(ctx)
	}
	return e.statementsExec(ctx, "SELECT pg_stat_statements_reset()")
}

// writeStatements appends the statements pg_stat_statements counted since
// its last reset, per job of the phase, to the --statements file, and
// resets it. Times are wall times: they include waits (locks, WAL
// flushes, the CPU shared with other sessions), unlike the server's CPU.
func (e *hostsEnv) writeStatements(ctx context.Context, n int, phase string, jobs int64) error {
	if e.statements == "" || e.round == 0 {
		return e.resetStatements(ctx)
	}
	if e.status != nil {
		return e.status.write(ctx, e.statements, n, e.round, phase, jobs)
	}
	conn, err := pgx.Connect(ctx, e.baseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, total_plan_time, rows, shared_blks_hit + shared_blks_read, wal_records,
    left(regexp_replace(query, '\s+', ' ', 'g'), 100)
  FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
  ORDER BY total_exec_time + total_plan_time DESC LIMIT 15`)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "== %d worker processes, round %d, %s of %d jobs: per 1,000 jobs (calls, exec and plan ms, rows, buffers, WAL records), then per call\n", n, e.round, phase, jobs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "calls\texec ms\tplan ms\trows\tbuffers\tWAL records\texec ms/call\tbuffers/call\t\tstatement\n")
	k := 1000 / float64(max(jobs, 1))
	for rows.Next() {
		var (
			calls, nrows, bufs, wal int64
			exec, plan              float64
			query                   string
		)
		if err := rows.Scan(&calls, &exec, &plan, &nrows, &bufs, &wal, &query); err != nil {
			return err
		}
		c := float64(max(calls, 1))
		fmt.Fprintf(tw, "%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.3f\t%.0f\t\t%s\n", float64(calls)*k, exec*k, plan*k, float64(nrows)*k, float64(bufs)*k, float64(wal)*k, exec/c, float64(bufs)/c, query)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := appendFile(e.statements, b.String()+"\n"); err != nil {
		return err
	}
	return e.resetStatements(ctx)
}

// appendFile appends text to the file name, creating it if needed.
func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pinHosts pins process self and its children to workerCPUs and the
// server's process tree to serverCPUs. Self first: a server that runs as
// self's child (mariadbd does) is one of the children pinTree pins with
// it, and pinned in the other order it ran on the workers' CPU, beside
// them, while the server's CPU sat idle. Backends the server forks later
// inherit its affinity.
func pinHosts(ctx context.Context, self, server int, workerCPUs, serverCPUs string) error {
	if err := pinTree(ctx, self, workerCPUs); err != nil {
		return err
	}
	return pinTree(ctx, server, serverCPUs)
}

// pinTree sets the CPU affinity of every thread of process root and of its
// child processes to cpus (a taskset list).
func pinTree(ctx context.Context, root int, cpus string) error {
	for _, pid := range append([]int{root}, bench.ChildPIDs(root)...) {
		out, err := exec.CommandContext(ctx, "taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
		if err != nil && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("pin process %d to CPUs %s: %w: %s", pid, cpus, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// close stops the server and removes the hosts and the directory.
func (e *hostsEnv) close() error {
	var errs []error
	if e.status != nil {
		e.status.stopSampler()
		errs = append(errs, e.status.be.Close())
	}
	if e.stop != nil {
		errs = append(errs, e.stop())
	}
	if e.hosts != nil {
		errs = append(errs, e.hosts.Close())
	}
	if e.keepDir {
		fmt.Fprintf(e.stderr, "lab hosts: kept %s\n", e.dir)
	} else {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// serverCPU is the server's CPU time so far.
func (e *hostsEnv) serverCPU() time.Duration {
	d, _ := bench.TreeCPU(e.server.PID())
	return d
}

// serverFaults is the server's minor page faults so far.
func (e *hostsEnv) serverFaults() int64 {
	n, _ := bench.TreeFaults(e.server.PID())
	return n
}

// onBridge returns dsn with its host replaced by the server's bridge
// address, as the hosts reach it.
func (e *hostsEnv) onBridge(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = e.hosts.ServerAddr() + ":" + u.Port()
	return u.String(), nil
}

// runStep drains jobs with n worker processes, then runs the pickup phase
// with them, on a fresh store.
func (e *hostsEnv) runStep(ctx context.Context, r *bench.ScenarioRun, n int, pickup hostsPickup) (step *hostsStep, err error) {
	jobs := e.load.jobs
	scratch, err := stores.For(e.baseURL).NewScratch(e.baseURL)
	if err != nil {
		return nil, err
	}
	be, err := backend.Open(ctx, scratch.URL)
	if err != nil {
		return nil, err
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = errors.Join(err, be.Close(), scratch.Drop(dropCtx))
	}()
	if err := be.Migrate(ctx); err != nil {
		return nil, err
	}
	client, err := spool.NewClient(be, &spool.Config{})
	if err != nil {
		return nil, err
	}
	var inserted atomic.Int64
	if _, err := bench.InsertJobs(ctx, client, spool.DefaultQueue, jobs, e.load.chunk, false, &inserted); err != nil {
		return nil, err
	}
	workerURL, err := e.onBridge(scratch.URL)
	if err == nil {
		workerURL, err = bench.WithClaimStrategy(workerURL, e.load.strategy)
	}
	if err == nil && e.load.claimLock != "" {
		workerURL, err = bench.SetURLParam(workerURL, "spool_claim_lock", e.load.claimLock)
	}
	if err == nil && e.load.wakeRouting != "" {
		workerURL, err = bench.SetURLParam(workerURL, "spool_wake_routing", e.load.wakeRouting)
	}
	if err == nil && e.load.poolMaxConns > 0 {
		workerURL, err = bench.SetURLParam(workerURL, "pool_max_conns", strconv.Itoa(e.load.poolMaxConns))
	}
	if err != nil {
		return nil, err
	}

	// The pickup phase's recorder is made before the workers start, since
	// their reports feed it; its base and size are set when the phase
	// begins.
	var rec atomic.Pointer[bench.PickupRecorder]
	onStart := func(seq int64, at time.Time, attemptedNS, returnedNS int64) {
		if p := rec.Load(); p != nil {
			p.HandlerStartedAt(seq, at)
			if attemptedNS != 0 {
				p.ClaimBeganAt(seq, time.Unix(0, attemptedNS))
			}
			if returnedNS != 0 {
				p.ClaimReturnedAt(seq, time.Unix(0, returnedNS))
			}
		}
	}
	workers := make([]*hostsWorker, 0, n)
	defer func() {
		for _, w := range workers {
			if serr := w.stop(); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	args := append(slices.Clone(e.load.workerArgs), "--database-url", workerURL)
	for i := range n {
		w, err := startHostsWorker(e.hosts, i, e.self, args, e.workerCPUs, r.Stderr, onStart)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.waitReady(ctx); err != nil {
			return nil, err
		}
	}

	step = &hostsStep{Processes: n}
	if step.ProbeServerUS, err = e.probe(ctx); err != nil {
		return nil, err
	}
	if step.FaultProbeUS, err = hostsFaultProbe(); err != nil {
		return nil, err
	}
	conns := startConnectionSampler(e.hosts, e.port)
	usage0, err := usageOf(ctx, workers)
	if err != nil {
		return nil, err
	}
	if err := e.resetStatements(ctx); err != nil {
		return nil, fmt.Errorf("--statements: %w", err)
	}
	startWorkers := func() error {
		for _, w := range workers {
			if err := w.send("go"); err != nil {
				return err
			}
		}
		return nil
	}
	if e.load.started > 0 {
		if err := client.QueuePause(ctx, spool.DefaultQueue); err != nil {
			return nil, err
		}
		if err := startWorkers(); err != nil {
			return nil, err
		}
		if !sleepUntil(ctx, time.Now().Add(e.load.started)) {
			return nil, ctx.Err()
		}
		if usage0, err = usageOf(ctx, workers); err != nil {
			return nil, err
		}
		if err := e.resetStatements(ctx); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
	}
	server0, faults0 := e.serverCPU(), e.serverFaults()
	start := time.Now()
	if e.load.started > 0 {
		if err := client.QueueResume(ctx, spool.DefaultQueue); err != nil {
			return nil, err
		}
	} else if err := startWorkers(); err != nil {
		return nil, err
	}
	written := func() int64 {
		var sum int64
		for _, w := range workers {
			sum += w.done.Load()
		}
		return sum
	}
	bar := r.Progress("drain", "jobs", int64(jobs), written)
	err = waitWritten(ctx, workers, written, int64(jobs))
	bar.Stop()
	elapsed := time.Since(start)
	server1, faults1 := e.serverCPU(), e.serverFaults()
	step.Connections = conns.stop(n)
	if err != nil {
		return nil, err
	}
	if err := e.writeStatements(ctx, n, "drain", int64(jobs)); err != nil {
		return nil, fmt.Errorf("--statements: %w", err)
	}
	usage1, err := usageOf(ctx, workers)
	if err != nil {
		return nil, err
	}
	drainUsage := usage1.sub(usage0)
	stats, err := bench.QueueStats(ctx, client, spool.DefaultQueue)
	if err != nil {
		return nil, fmt.Errorf("check the drain: %w", err)
	}
	wantCompleted := int64(jobs)
	if e.load.deleteCompleted {
		wantCompleted = 0
	}
	if bench.PendingCount(stats) != 0 || stats.Counts[backend.StateCompleted] != wantCompleted {
		return nil, fmt.Errorf("%d completions written but the queue holds %s", written(), bench.FormatCounts(stats))
	}
	step.DrainSeconds = elapsed.Seconds()
	step.DrainJobsPerS = cli.Rate(int64(jobs), elapsed)
	step.DrainRuns = []float64{step.DrainJobsPerS}
	step.ClientCPUPerJobUS = bench.PerJobUS(drainUsage.cpu, jobs)
	step.DrainClaims, step.DrainEmptyClaims = drainUsage.claims, drainUsage.empty
	step.DrainFinishes = drainUsage.finishes
	step.DrainClaimMS, step.DrainFinishMS = bench.MS(drainUsage.claimTime), bench.MS(drainUsage.finishTime)
	step.ServerCPUPerJobUS = bench.PerJobUS(server1-server0, jobs)
	step.ServerFaultsPerJob = float64(faults1-faults0) / float64(jobs)
	step.ServerCPUShare = (server1 - server0).Seconds() / (elapsed.Seconds() * float64(e.serverCPUs))
	if e.load.warm {
		if step.Warm, err = e.warmDrain(ctx, r, client, workers, written); err != nil {
			return nil, fmt.Errorf("warm drain: %w", err)
		}
		if usage1, err = usageOf(ctx, workers); err != nil {
			return nil, err
		}
		// The pickup phase's statements leave out the warm drain's.
		if err := e.resetStatements(ctx); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
	}

	if pickup.d > 0 {
		total := max(1, int64(pickup.rate*pickup.d.Seconds()))
		server0, faults0 := e.serverCPU(), e.serverFaults()
		p := bench.NewPickupRecorder(time.Now(), total)
		rec.Store(p)
		producer := &bench.SteadyLoad{Client: client, Rate: pickup.rate, Producers: pickup.producers, Rec: p}
		bar := r.Progress("pickup", "jobs", total, producer.Inserted.Load)
		err := producer.Run(ctx, p.Base, total, p.Base.Add(pickup.d))
		if err == nil {
			err = bench.WaitStarted(ctx, p, producer.Inserted.Load())
		}
		bar.Stop()
		if err != nil {
			return nil, fmt.Errorf("pickup phase: %w", err)
		}
		step.PickupServerCPUPerJobUS = bench.PerJobUS(e.serverCPU()-server0, int(max(1, producer.Inserted.Load())))
		step.PickupServerFaultsPerJob = float64(e.serverFaults()-faults0) / float64(max(1, producer.Inserted.Load()))
		usage2, err := usageOf(ctx, workers)
		if err != nil {
			return nil, err
		}
		pickupUsage := usage2.sub(usage1)
		step.PickupClaims, step.PickupEmptyClaims = pickupUsage.claims, pickupUsage.empty
		lat, _ := p.Latencies(producer.Inserted.Load())
		step.Pickup = bench.Summarize(bench.Durations(lat))
		fmt.Fprintf(r.Stderr, "lab hosts: %d processes, pickup split at the claim's start: %s\n", n, p.Split(producer.Inserted.Load()))
		fmt.Fprintf(r.Stderr, "lab hosts: %d processes, pickup by commit order: %s\n", n, p.Order(producer.Inserted.Load()))
		step.PickupJobs = producer.Inserted.Load()
		step.PickupJobsPerS = float64(step.PickupJobs) / pickup.d.Seconds()
		step.Duplicates = p.Duplicates.Load()
		if err := e.writeStatements(ctx, n, "pickup", producer.Inserted.Load()); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
	}
	if pickup.idle > 0 {
		// Idle: the workers have nothing to do; what they cost the server
		// is their looks for work. Measured after 3 s, past any backoff
		// they start when no job comes.
		if !sleepUntil(ctx, time.Now().Add(3*time.Second)) {
			return nil, ctx.Err()
		}
		if err := e.resetStatements(ctx); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
		server0, begin := e.serverCPU(), time.Now()
		if !sleepUntil(ctx, begin.Add(pickup.idle)) {
			return nil, ctx.Err()
		}
		idle := time.Since(begin)
		step.IdleServerCPUShare = (e.serverCPU() - server0).Seconds() / (idle.Seconds() * float64(e.serverCPUs))
		// Per second: the statements of 1,000 "jobs" are those of 1,000
		// seconds.
		if err := e.writeStatements(ctx, n, "idle, per 1,000 s (not jobs)", max(1, int64(idle.Seconds()))); err != nil {
			return nil, fmt.Errorf("--statements: %w", err)
		}
	}
	return step, nil
}

// medianStep sums up the rounds of one number of processes.
func medianStep(steps []hostsStep) hostsStep {
	of := func(f func(s *hostsStep) float64) float64 {
		vs := make([]float64, len(steps))
		for i := range steps {
			vs[i] = f(&steps[i])
		}
		return bench.Median(vs)
	}
	out := hostsStep{Processes: steps[0].Processes, Connections: make([]int, len(steps[0].Connections))}
	for i := range steps {
		out.DrainRuns = append(out.DrainRuns, steps[i].DrainRuns...)
		for h, c := range steps[i].Connections {
			out.Connections[h] = max(out.Connections[h], c)
		}
		out.PickupJobs += steps[i].PickupJobs
		out.DrainClaims += steps[i].DrainClaims
		out.DrainEmptyClaims += steps[i].DrainEmptyClaims
		out.DrainFinishes += steps[i].DrainFinishes
		out.DrainClaimMS += steps[i].DrainClaimMS
		out.DrainFinishMS += steps[i].DrainFinishMS
		out.PickupClaims += steps[i].PickupClaims
		out.PickupEmptyClaims += steps[i].PickupEmptyClaims
		out.Duplicates += steps[i].Duplicates
	}
	out.DrainSeconds = of(func(s *hostsStep) float64 { return s.DrainSeconds })
	out.DrainJobsPerS = of(func(s *hostsStep) float64 { return s.DrainJobsPerS })
	out.ClientCPUPerJobUS = of(func(s *hostsStep) float64 { return s.ClientCPUPerJobUS })
	out.ServerCPUPerJobUS = of(func(s *hostsStep) float64 { return s.ServerCPUPerJobUS })
	out.ServerCPUShare = of(func(s *hostsStep) float64 { return s.ServerCPUShare })
	out.ServerFaultsPerJob = of(func(s *hostsStep) float64 { return s.ServerFaultsPerJob })
	out.PickupServerFaultsPerJob = of(func(s *hostsStep) float64 { return s.PickupServerFaultsPerJob })
	out.PickupServerCPUPerJobUS = of(func(s *hostsStep) float64 { return s.PickupServerCPUPerJobUS })
	out.IdleServerCPUShare = of(func(s *hostsStep) float64 { return s.IdleServerCPUShare })
	out.PickupJobsPerS = of(func(s *hostsStep) float64 { return s.PickupJobsPerS })
	out.ProbeServerUS = of(func(s *hostsStep) float64 { return s.ProbeServerUS })
	out.FaultProbeUS = of(func(s *hostsStep) float64 { return s.FaultProbeUS })
	out.Warm = medianWarm(steps)
	out.Pickup = bench.LatencyStats{
		Count: int(of(func(s *hostsStep) float64 { return float64(s.Pickup.Count) })),
		Mean:  of(func(s *hostsStep) float64 { return s.Pickup.Mean }),
		P50:   of(func(s *hostsStep) float64 { return s.Pickup.P50 }),
		P95:   of(func(s *hostsStep) float64 { return s.Pickup.P95 }),
		P99:   of(func(s *hostsStep) float64 { return s.Pickup.P99 }),
		P999:  of(func(s *hostsStep) float64 { return s.Pickup.P999 }),
		Max:   of(func(s *hostsStep) float64 { return s.Pickup.Max }),
	}
	return out
}

// medianWarm sums up the rounds' warm drains (nil when they ran none).
func medianWarm(steps []hostsStep) *hostsDrain {
	var ws []*hostsDrain
	for i := range steps {
		if steps[i].Warm != nil {
			ws = append(ws, steps[i].Warm)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	of := func(f func(w *hostsDrain) float64) float64 {
		vs := make([]float64, len(ws))
		for i, w := range ws {
			vs[i] = f(w)
		}
		return bench.Median(vs)
	}
	out := &hostsDrain{}
	for _, w := range ws {
		out.DrainRuns = append(out.DrainRuns, w.DrainRuns...)
		out.NewConnections = max(out.NewConnections, w.NewConnections)
	}
	out.DrainJobsPerS = of(func(w *hostsDrain) float64 { return w.DrainJobsPerS })
	out.ServerCPUPerJobUS = of(func(w *hostsDrain) float64 { return w.ServerCPUPerJobUS })
	out.ServerFaultsPerJob = of(func(w *hostsDrain) float64 { return w.ServerFaultsPerJob })
	out.ServerCPUShare = of(func(w *hostsDrain) float64 { return w.ServerCPUShare })
	out.ClientCPUPerJobUS = of(func(w *hostsDrain) float64 { return w.ClientCPUPerJobUS })
	return out
}

// hostsLoad is what every step of a run drains, and how its worker
// processes are started.
type hostsLoad struct {
	workerArgs      []string // the workers' command line, but the URL
	strategy        string   // the workers' claim strategy ("": the backend's)
	claimLock       string   // the workers' spool_claim_lock ("": the backend's)
	wakeRouting     string   // the workers' spool_wake_routing ("": the backend's)
	jobs, chunk     int      // jobs drained, inserted chunk at a time
	deleteCompleted bool
	// warm: each step drains a second time with the same processes
	// (hostsStep.Warm).
	warm bool
	// poolMaxConns, when positive, is the workers' pool_max_conns.
	poolMaxConns int
	// started, when positive, is how long the workers run on the paused
	// queue before the drain, which is timed from the queue's resume: the
	// processes' start (connections, catalog caches, plans, elections)
	// is left out of the drain's figures.
	started time.Duration
}

// hostsPickup is the pickup phase's load: rate jobs a second, inserted by
// producers goroutines, for d; then an idle phase of idle.
type hostsPickup struct {
	rate      float64
	producers int
	d         time.Duration
	idle      time.Duration // the idle phase after it
}

// waitWritten waits until the workers have written want completions. It
// fails when a worker ends, or when nothing moves for bench.StallTimeout.
func waitWritten(ctx context.Context, workers []*hostsWorker, written func() int64, want int64) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := int64(-1), time.Now()
	for {
		n := written()
		if n >= want {
			return nil
		}
		for _, w := range workers {
			select {
			case <-w.exited:
				return fmt.Errorf("worker on host %d ended during the drain: %v", w.host, w.err)
			default:
			}
		}
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > bench.StallTimeout {
			return fmt.Errorf("only %d of %d completions written, none in the last %s", n, want, bench.StallTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d completions written: %w", n, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// connectionSampler samples, every 100 ms, the server's established TCP
// connections by client address, keeping each host's most. It reads them
// from the kernel (/proc/net/tcp of this namespace, where the server
// runs), which counts the same way for every server.
type connectionSampler struct {
	hosts *netns.Hosts
	done  chan struct{}
	most  chan map[string]int
}

func startConnectionSampler(hosts *netns.Hosts, port int) *connectionSampler {
	s := &connectionSampler{hosts: hosts, done: make(chan struct{}), most: make(chan map[string]int, 1)}
	go func() {
		most := map[string]int{}
		defer func() { s.most <- most }()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := tcpPeers(hosts.ServerAddr(), port); err == nil {
				for addr, c := range m {
					most[addr] = max(most[addr], c)
				}
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// tcpPeers counts the established connections to addr:port by remote
// address.
func tcpPeers(addr string, port int) (map[string]int, error) {
	remotes, err := tcpRemotes(addr, port)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, r := range remotes {
		host, _, _ := strings.Cut(r, ":")
		m[host]++
	}
	return m, nil
}

// tcpRemotes lists the remote ends ("ip:port") of the established
// connections to addr:port, from /proc/net/tcp (addresses there are
// hexadecimal, in the machine's byte order).
func tcpRemotes(addr string, port int) ([]string, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		return nil, fmt.Errorf("%q is not an IPv4 address", addr)
	}
	local := fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(ip), port)
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[1] != local || f[3] != "01" { // 01: ESTABLISHED
			continue
		}
		hexIP, hexPort, _ := strings.Cut(f[2], ":")
		v, err := strconv.ParseUint(hexIP, 16, 32)
		if err != nil {
			continue
		}
		rport, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			continue
		}
		var peer [4]byte
		binary.NativeEndian.PutUint32(peer[:], uint32(v))
		out = append(out, net.IP(peer[:]).String()+":"+strconv.FormatUint(rport, 10))
	}
	return out, nil
}

// stop ends the sampling and returns the most connections seen from each
// of the first n hosts.
func (s *connectionSampler) stop(n int) []int {
	close(s.done)
	most := <-s.most
	out := make([]int, n)
	for i := range out {
		out[i] = most[s.hosts.Addr(i)]
	}
	return out
}

// hostsFigure draws the drain rate, the server's CPU share and the pickup
// latency against the number of processes.
func hostsFigure(r *hostsResult) *plot.Figure {
	var rate, share, p50, p99 []plot.Point
	for _, s := range r.Steps {
		x := float64(s.Processes)
		rate = append(rate, plot.Point{X: x, Y: s.DrainJobsPerS})
		share = append(share, plot.Point{X: x, Y: s.ServerCPUShare})
		p50 = append(p50, plot.Point{X: x, Y: s.Pickup.P50})
		p99 = append(p99, plot.Point{X: x, Y: s.Pickup.P99})
	}
	return &plot.Figure{
		Title: fmt.Sprintf("hosts: %s, worker processes on simulated hosts (%d CPUs)", r.Server, r.CPUs),
		Charts: []*plot.Chart{
			{Title: fmt.Sprintf("Drain of %d jobs", r.Jobs), XLabel: "worker processes", YLabel: "jobs/s", XFromZero: true,
				Lines: []plot.Line{{Name: "drain", Points: rate, Markers: true}}},
			{Title: "Server CPU time over wall time × the CPUs it may use, during the drain", XLabel: "worker processes", YLabel: "share", XFromZero: true,
				Lines: []plot.Line{{Name: "server", Points: share, Markers: true}}},
			{Title: fmt.Sprintf("Pickup latency at %s jobs/s", cli.HumanInt(r.Rate)), XLabel: "worker processes", YLabel: "ms", XFromZero: true,
				Lines: []plot.Line{{Name: "p50", Points: p50, Markers: true}, {Name: "p99", Points: p99, Markers: true}}},
		},
	}
}

// printHosts prints one row per number of processes.
func printHosts(w io.Writer, r *hostsResult) error {
	pinned := ""
	if r.ServerCPUs != "" {
		pinned = fmt.Sprintf(" (server on CPU %s, workers on %s)", r.ServerCPUs, r.WorkerCPUs)
	}
	fmt.Fprintf(w, "lab hosts: %s (durable), %d CPUs%s; drain of %d jobs, %d workers a process; pickup at %s jobs/s for %gs\n",
		r.Server, r.CPUs, pinned, r.Jobs, r.Workers, cli.HumanInt(r.Rate), r.PickupSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "processes\tprobe µs\tfault µs\tjobs/s\tclient µs/job\tserver µs/job\tserver faults/job\tserver CPU share\tjobs/claim\tconnections each\t"+
		"warm jobs/s\twarm server µs/job\twarm faults/job\twarm new conns\t"+
		"pickup jobs/s\tpickup p50 ms\tpickup p99 ms\tpickup server µs/job\tpickup server faults/job\tpickup claims/job\tempty\tidle server CPU\t")
	for _, s := range r.Steps {
		conns := make([]string, len(s.Connections))
		for i, c := range s.Connections {
			conns[i] = strconv.Itoa(c)
		}
		warm := "-\t-\t-\t-"
		if s.Warm != nil {
			warm = fmt.Sprintf("%s\t%.1f\t%.2f\t%d", cli.HumanInt(s.Warm.DrainJobsPerS), s.Warm.ServerCPUPerJobUS, s.Warm.ServerFaultsPerJob, s.Warm.NewConnections)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%s\t%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t%.2f\t%.2f\t%.0f\t%.1f\t%.2f\t%.0f%%\t%.3f\t\n", s.Processes, s.ProbeServerUS, s.FaultProbeUS, cli.HumanInt(s.DrainJobsPerS),
			s.ClientCPUPerJobUS, s.ServerCPUPerJobUS, s.ServerFaultsPerJob, s.ServerCPUShare, ratio(float64(len(s.DrainRuns)*r.Jobs), float64(s.DrainClaims-s.DrainEmptyClaims)),
			strings.Join(conns, " "), warm, cli.HumanInt(s.PickupJobsPerS), s.Pickup.P50, s.Pickup.P99, s.PickupServerCPUPerJobUS, s.PickupServerFaultsPerJob,
			ratio(float64(s.PickupClaims), float64(s.PickupJobs)), 100*ratio(float64(s.PickupEmptyClaims), float64(s.PickupClaims)), s.IdleServerCPUShare)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The state the guest was in, and what the processes' start cost: a
	// first drain's faults are new backends mapping shared memory, paid
	// once a connection; at a fault's cost on this machine they are
	// server CPU a job that long-running workers do not pay again.
	for _, s := range r.Steps {
		line := fmt.Sprintf("%d processes: a minor fault cost %.2f µs (fault probe); the first drain's server faults %.2f a job, about %.1f µs of its %.1f µs a job",
			s.Processes, s.FaultProbeUS, s.ServerFaultsPerJob, s.FaultProbeUS*s.ServerFaultsPerJob, s.ServerCPUPerJobUS)
		if s.Warm != nil {
			line += fmt.Sprintf("; warm %.2f a job, about %.1f µs of %.1f", s.Warm.ServerFaultsPerJob, s.FaultProbeUS*s.Warm.ServerFaultsPerJob, s.Warm.ServerCPUPerJobUS)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Usage implements cli.Command.
func (c *BenchHostsCommand) Usage() string {
	return `usage: lab hosts [flags]

Runs worker processes on simulated hosts: each process in a network
namespace of its own, joined by a veth pair to a bridge on which a database
server started by the bench listens (PostgreSQL 15 or MariaDB, in a
temporary directory, durable as a default installation: fsync on, InnoDB
flushing at every commit). For each number of processes it inserts --jobs
no-op jobs, times the processes draining them together (to the last
completion written), then inserts --rate jobs a second for
--pickup-duration and measures pickup latency (insert commit to handler
start, across processes); an unreported drain with one process warms the
new server first. It reports the connections the server saw from
each host, the workers' and the server's CPU time per job, the server's
minor page faults per job (each new connection's backend faults in the
shared memory it touches, which some virtual machines make slow), and the
server's share of the machine's CPUs: near 1, the database is the limit.
Before each drain a speed probe times 2,000 SELECT 1 round trips on one
connection: the server's CPU a statement ("probe µs"). The work is the
same in every run, so runs whose probes differ by much ran on a machine of
a different speed and their figures do not compare. A fault probe then
times this process's first touches of a new 16 MB shared mapping: the CPU
a minor page fault costs the machine then ("fault µs"), the cost of each
of the server's faults; a line a step under the table multiplies the two. The pickup phase's
achieved rate is shown beside its latencies: below --rate, the inserting
goroutines were starved of CPU. Needs root and iproute2.

	--server postgres|mariadb
		the server to start (default postgres)
	--hosts LIST
		numbers of worker processes, comma-separated (default 1,2,4,8)
	--jobs N
		jobs drained at each number of processes (default 100000)
	--rate N
		jobs inserted per second in the pickup phase (default 1000)
	--pickup-duration DURATION
		length of the pickup phase; 0 skips it (default 10s)
	--producers N
		inserting goroutines of the pickup phase (default 4)
	--idle-duration DURATION
		then nothing is inserted: after 3 s, the server's CPU share is
		measured for this long, what idle processes cost it; 0 skips it
		(default 5s)
	--rounds N
		run the whole list N times, in alternate order, and report each
		figure's median over the rounds (default 1)
	--warm=false
		skip the warm drain: by default, after each drain the same
		processes, on the connections their pools hold, drain --jobs
		more (inserted while the queue is paused, timed from its
		resume), reported apart ("warm ..."). The first drain is of new
		processes, whose pools open their connections as it runs, and
		on PostgreSQL each new backend faults in every page of shared
		memory it touches: a cost paid once a connection, which the
		warm drain shows without ("warm new conns": connections the
		pools opened during it)
	--pool-max-conns N
		PostgreSQL: each worker process's pool_max_conns (default: the
		backend's, 16)
	--huge-pages
		PostgreSQL: start the server with huge_pages = on, its shared
		memory in 2 MB pages, so that a new backend faults it in by
		the huge page instead of by the 4 kB page (an experiment on the
		cost of new backends' faults). The pages must be reserved
		first (sysctl vm.nr_hugepages, about 80 for the server's
		default 128 MB of shared buffers), or the server does not
		start; set the reservation back afterwards (default off: the
		server's default, huge_pages = try, which uses none unless
		some are reserved)
	--started DURATION
		start the worker processes this long before the drain, with the
		queue paused, and time the drain from its resume: the figures
		then leave out the processes' start (connections, the statements'
		plans on each, elections), which otherwise falls in the drain, once
		per process (default 0: the drain is timed from their start)
	--pin
		run the server on CPU 0 and the worker processes, and this one, on
		the others: as on separate machines, the workers take no CPU from
		the server, and its CPU share is of that one CPU
	--strategy pessimistic|optimistic
		the workers' claim strategy (default: the backend's)
	--claim-lock queue|off
		whether the workers' claims of a queue take turns under the
		queue's claim lock (spool_claim_lock; default: the backend's,
		queue)
	--wake-routing looker|on|off
		whether each insert's wake-up goes to one of the worker processes
		(spool_wake_routing; default: the backend's, on for PostgreSQL,
		looker for MariaDB: one process at a time looks for new jobs)
	--statements FILE
		PostgreSQL: load pg_stat_statements (track_planning on) in the
		server and append to FILE, after each measured drain and pickup
		phase, its 15 costliest statements per 1,000 jobs and per call:
		calls, execution and planning time (wall time, waits included),
		rows, buffers, WAL records; MariaDB: the growth of its global
		status counters per 1,000 jobs (statements by kind, rows read
		by key and in order, row lock waits and their time, log writes
		and fsyncs); after the idle phase, the same per 1,000 seconds
	--workers N
		MaxWorkers of each process (default 100)
	--prefetch N
		Prefetch of each process (default 1000)
	--batch N
		CompletionBatchMax (default 2000)
	--completion-delay DURATION
		CompletionDelay (default 0s)
	--delete-completed
		delete jobs as they complete
	--insert-chunk N
		jobs per insert call of the drain's backlog (default 10000)
	--plot FILE
		draw the drain rate, the server's CPU share and pickup latency
		against the number of processes into FILE (.png or .svg)
	--json
		print only a JSON object with the results and settings on stdout
	--keep
		keep the server's temporary directory
	--quiet
		draw no progress on stderr
	--timeout DURATION
		give up after this long (default 0: no limit)
`
}
