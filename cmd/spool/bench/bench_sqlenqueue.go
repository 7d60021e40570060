package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/plot"
)

func init() {
	registerScenario("sqlenqueue", "PostgreSQL: enqueue() from SQL against a plain INSERT into a copy of spool_jobs, and the pickup of jobs enqueued from SQL",
		func(m *cli.Env) cli.Command { return &BenchSQLEnqueueCommand{m: m} })
}

// BenchSQLEnqueueCommand measures the path of producers in other languages:
// sessions calling <schema>.enqueue() one job per transaction, paired with
// the same sessions inserting the same row into a copy of spool_jobs (its
// columns, defaults and indexes, no trigger), while a worker's subscription
// is open; then the pickup of jobs enqueued from SQL at a fixed rate.
type BenchSQLEnqueueCommand struct{ m *cli.Env }

// SQLPickupArgs are the jobs of the pickup phase.
type SQLPickupArgs struct {
	Seq int64 `json:"seq"`
}

// Kind implements spool.JobArgs.
func (SQLPickupArgs) Kind() string { return "spool_bench_sql_pickup" }

type sqlEnqueueResult struct {
	Scenario    string    `json:"scenario"`
	Store       string    `json:"store"`
	Clients     int       `json:"clients"`
	Duration    string    `json:"duration"`
	Rounds      int       `json:"rounds"`
	Listening   bool      `json:"listening"`
	IdleWorker  bool      `json:"idle_worker"`
	EnqueueRuns []float64 `json:"enqueue_tps_runs"`
	InsertRuns  []float64 `json:"insert_tps_runs"`
	Ratios      []float64 `json:"ratio_runs"`
	Ratio       float64   `json:"ratio_median"`
	Enqueue     float64   `json:"enqueue_tps_median"`
	Insert      float64   `json:"insert_tps_median"`
	// The inserting sessions' server CPU per transaction, in microseconds,
	// by round (their backends' /proc times; 0 where not readable): unlike
	// the rates, hardly moved by other work on the machine.
	EnqueueCPUUS []float64 `json:"enqueue_server_cpu_per_tx_us,omitempty"`
	InsertCPUUS  []float64 `json:"insert_server_cpu_per_tx_us,omitempty"`
	// The CPU per transaction of every process of the sessions' server
	// (the relay's polls and notifications included, on a machine of its
	// own only), and of this process (the sessions' client side and the
	// subscription's relay), by round.
	EnqueueAllCPUUS    []float64    `json:"enqueue_all_server_cpu_per_tx_us,omitempty"`
	InsertAllCPUUS     []float64    `json:"insert_all_server_cpu_per_tx_us,omitempty"`
	EnqueueClientCPUUS []float64    `json:"enqueue_client_cpu_per_tx_us,omitempty"`
	InsertClientCPUUS  []float64    `json:"insert_client_cpu_per_tx_us,omitempty"`
	WakeUps            int64        `json:"wake_ups_heard"`
	Counted            int64        `json:"inserts_counted"`
	PickupRate         float64      `json:"pickup_rate"`
	PickupJobs         int64        `json:"pickup_jobs"`
	Pickup             LatencyStats `json:"pickup_latency"`
}

// Run implements cli.Command.
func (c *BenchSQLEnqueueCommand) Run(ctx context.Context, args []string) error {
	r := NewScenarioRun(c.m, "bench sqlenqueue")
	clients := r.Flags.Int("clients", 8, "sessions inserting at once, one job per transaction")
	duration := r.Flags.Duration("duration", 5*time.Second, "how long each side inserts in each round")
	rounds := r.Flags.Int("rounds", 3, "rounds; enqueue() and the plain INSERT alternate, each round starting with the other")
	listen := r.Flags.Bool("listen", true, "keep a worker's subscription open while inserting (without one nobody relays, and every insert from SQL notifies)")
	idle := r.Flags.Bool("idle-worker", false, "count the subscription as a client with an idle worker, whose relay polls every millisecond (without: as one whose workers are all busy)")
	rate := r.Flags.Float64("pickup-rate", 1000, "jobs per second enqueued from SQL in the pickup phase (0: no pickup phase)")
	pickupFor := r.Flags.Duration("pickup-duration", 5*time.Second, "how long the pickup phase enqueues")
	if err := r.Parse(args, c.Usage()); err != nil {
		return err
	}
	if err := r.Check(
		Want(*clients >= 1 && *clients <= 64, "--clients must be between 1 and 64"),
		Want(*duration > 0, "--duration must be positive"),
		Want(*rounds >= 1 && *rounds <= 100, "--rounds must be between 1 and 100"),
		Want(*rate >= 0 && *rate <= 100000, "--pickup-rate must be between 0 and 100000"),
	); err != nil {
		return err
	}
	ctx = r.Begin(ctx)
	defer r.End()
	store, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	pg, err := PGBackend(store.Backend)
	if err != nil {
		return fmt.Errorf("bench sqlenqueue: %w", err)
	}
	schema := pgx.Identifier{pg.Schema()}.Sanitize()
	if _, err := pg.Pool().Exec(ctx, `CREATE TABLE `+schema+`.spool_jobs_copy (LIKE `+schema+`.spool_jobs INCLUDING ALL)`); err != nil {
		return fmt.Errorf("bench sqlenqueue: copy spool_jobs: %w", err)
	}
	res := sqlEnqueueResult{Scenario: "sqlenqueue", Store: store.Scratch.Name, Clients: *clients, Duration: duration.String(),
		Rounds: *rounds, Listening: *listen, IdleWorker: *idle, PickupRate: *rate}
	var heard atomic.Int64
	if *idle {
		defer pg.AddWakeDemand(func() bool { return true })()
	}
	if *listen {
		listenCtx, stopListen := context.WithCancel(ctx)
		defer stopListen()
		ready := make(chan struct{})
		go func() {
			_ = store.Backend.(backend.Notifier).Listen(listenCtx, func() { close(ready) }, func(backend.Wake) { heard.Add(1) })
		}()
		select {
		case <-ready:
		case <-ctx.Done():
			return WithCause(ctx, ctx.Err())
		}
	}
	conns := make([]*pgx.Conn, *clients)
	for i := range conns {
		if conns[i], err = PGConnect(ctx, pg, "spool-bench-sqlenqueue"); err != nil {
			return fmt.Errorf("bench sqlenqueue: connect: %w", err)
		}
		defer conns[i].Close(context.Background())
	}
	enqueue := `SELECT ` + schema + `.enqueue('bench', '{"n":1}')`
	insert := `INSERT INTO ` + schema + `.spool_jobs_copy (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata)
VALUES ('default', 'bench', '{"n":1}', 0, now(), 'available', 25, '{}', '{}')`
	if err := r.StartProfile(); err != nil {
		return err
	}
	pids := make([]int, len(conns))
	for i, conn := range conns {
		pids[i] = int(conn.PgConn().PID())
	}
	// The sessions' postmaster and its children: this server's every
	// process, apart from any other server on the machine.
	postmaster := ParentPID(pids[0])
	for round := range *rounds {
		var e, p float64
		var cpu [2][3]float64 // by side: sessions, every server process, this process
		for k := range 2 {
			side := (k + round) % 2
			stmt := enqueue
			if side == 1 {
				stmt = insert
			}
			span := startCPUSpan(func() []int { return pids })
			tree, treeOK := TreeCPU(postmaster)
			rate, n, err := sqlInsertFor(ctx, conns, stmt, *duration)
			if err != nil {
				return WithCause(ctx, fmt.Errorf("bench sqlenqueue: %w", err))
			}
			cpu[side][2], _, cpu[side][0] = span.perJob(int(n), "postgres")
			if now, ok := TreeCPU(postmaster); ok && treeOK && postmaster > 1 {
				cpu[side][1] = PerJobUS(now-tree, int(n))
			}
			if side == 0 {
				e = rate
			} else {
				p = rate
			}
		}
		res.EnqueueRuns = append(res.EnqueueRuns, e)
		res.InsertRuns = append(res.InsertRuns, p)
		res.Ratios = append(res.Ratios, e/p)
		res.EnqueueCPUUS = append(res.EnqueueCPUUS, cpu[0][0])
		res.InsertCPUUS = append(res.InsertCPUUS, cpu[1][0])
		res.EnqueueAllCPUUS = append(res.EnqueueAllCPUUS, cpu[0][1])
		res.InsertAllCPUUS = append(res.InsertAllCPUUS, cpu[1][1])
		res.EnqueueClientCPUUS = append(res.EnqueueClientCPUUS, cpu[0][2])
		res.InsertClientCPUUS = append(res.InsertClientCPUUS, cpu[1][2])
		fmt.Fprintf(r.Env.Stderr, "sqlenqueue: round %d: enqueue() %s/s, INSERT %s/s, ratio %.2f; CPU per transaction, enqueue() / INSERT: sessions' server %.1f / %.1f µs, the server's processes %.1f / %.1f µs, this process %.1f / %.1f µs\n",
			round+1, cli.HumanInt(e), cli.HumanInt(p), e/p, cpu[0][0], cpu[1][0], cpu[0][1], cpu[1][1], cpu[0][2], cpu[1][2])
	}
	res.Enqueue, res.Insert, res.Ratio = Median(res.EnqueueRuns), Median(res.InsertRuns), Median(res.Ratios)
	res.WakeUps = heard.Load()
	if err := pg.Pool().QueryRow(ctx, `SELECT last_value FROM `+schema+`.spool_sql_enqueues`).Scan(&res.Counted); err != nil {
		return fmt.Errorf("bench sqlenqueue: read the counter: %w", err)
	}
	if *rate > 0 {
		if err := c.pickup(ctx, r, store, conns[0], schema, *rate, *pickupFor, &res); err != nil {
			return err
		}
	}
	return r.Finish(res, func(w io.Writer) error { return printSQLEnqueueResult(w, &res) }, func() *plot.Figure { return nil })
}

// sqlInsertFor has every conn run stmt, one per transaction, for d, and
// returns the statements per second and how many ran.
func sqlInsertFor(ctx context.Context, conns []*pgx.Conn, stmt string, d time.Duration) (float64, int64, error) {
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	end := start.Add(d)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				if _, err := conn.Exec(ctx, stmt); err != nil {
					once.Do(func() { first = err })
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
	return cli.Rate(n.Load(), time.Since(start)), n.Load(), ctx.Err()
}

// pickup enqueues jobs from SQL at rate for d while a client works them, and
// records from each enqueue's commit (its reply) to its handler's start.
func (c *BenchSQLEnqueueCommand) pickup(ctx context.Context, r *ScenarioRun, store *Store, conn *pgx.Conn, schema string, rate float64, d time.Duration, res *sqlEnqueueResult) error {
	total := int64(rate * d.Seconds())
	if total < 1 {
		total = 1
	}
	committed := make([]atomic.Int64, total)
	started := make([]atomic.Int64, total)
	base := time.Now()
	ws := spool.NewWorkers()
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[SQLPickupArgs]) error {
		if s := j.Args.Seq; s >= 0 && s < total {
			started[s].CompareAndSwap(0, int64(time.Since(base))+1)
		}
		return nil
	})); err != nil {
		return err
	}
	client, err := spool.NewClient(store.Backend, &spool.Config{Workers: ws, CompletedRetention: -1, Logger: r.Logger(),
		Queues: map[string]spool.QueueConfig{"sqlpickup": {MaxWorkers: 10}}})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer stopClient(r.Env.Stderr, r.Name, client)
	stmt := `SELECT ` + schema + `.enqueue('spool_bench_sql_pickup', jsonb_build_object('seq', $1::bigint), queue => 'sqlpickup')`
	every := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for seq := range total {
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		next = next.Add(every)
		if _, err := conn.Exec(ctx, stmt, seq); err != nil {
			return fmt.Errorf("bench sqlenqueue: pickup: enqueue: %w", err)
		}
		committed[seq].Store(int64(time.Since(base)) + 1)
	}
	deadline := time.Now().Add(30 * time.Second)
	var ds []time.Duration
	for {
		ds = ds[:0]
		missing := 0
		for i := range total {
			s, c := started[i].Load(), committed[i].Load()
			if s == 0 {
				missing++
				continue
			}
			ds = append(ds, max(0, time.Duration(s-c)))
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench sqlenqueue: pickup: %d of %d jobs did not start within 30 s", missing, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	res.PickupJobs = total
	res.Pickup = Summarize(ds)
	return nil
}

func printSQLEnqueueResult(w io.Writer, r *sqlEnqueueResult) error {
	fmt.Fprintf(w, "sqlenqueue: %d sessions, one job per transaction, %s per side, %d round(s), subscription open: %v, with an idle worker: %v\n\n",
		r.Clients, r.Duration, r.Rounds, r.Listening, r.IdleWorker)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIDE\tTX/S\tRUNS")
	fmt.Fprintf(tw, "enqueue()\t%s\t%s\n", cli.HumanInt(r.Enqueue), FormatRuns(r.EnqueueRuns))
	fmt.Fprintf(tw, "INSERT into a copy\t%s\t%s\n", cli.HumanInt(r.Insert), FormatRuns(r.InsertRuns))
	if len(r.EnqueueCPUUS) > 0 && r.EnqueueCPUUS[0] > 0 {
		fmt.Fprintf(tw, "server CPU µs/tx, enqueue()\t%.1f\t%s\n", Median(r.EnqueueCPUUS), FormatRuns(r.EnqueueCPUUS))
		fmt.Fprintf(tw, "server CPU µs/tx, INSERT\t%.1f\t%s\n", Median(r.InsertCPUUS), FormatRuns(r.InsertCPUUS))
	}
	if len(r.EnqueueAllCPUUS) > 0 && r.EnqueueAllCPUUS[0] > 0 {
		fmt.Fprintf(tw, "the server's processes µs/tx, enqueue()\t%.1f\t%s\n", Median(r.EnqueueAllCPUUS), FormatRuns(r.EnqueueAllCPUUS))
		fmt.Fprintf(tw, "the server's processes µs/tx, INSERT\t%.1f\t%s\n", Median(r.InsertAllCPUUS), FormatRuns(r.InsertAllCPUUS))
	}
	if len(r.EnqueueClientCPUUS) > 0 && r.EnqueueClientCPUUS[0] > 0 {
		fmt.Fprintf(tw, "this process µs/tx, enqueue()\t%.1f\t%s\n", Median(r.EnqueueClientCPUUS), FormatRuns(r.EnqueueClientCPUUS))
		fmt.Fprintf(tw, "this process µs/tx, INSERT\t%.1f\t%s\n", Median(r.InsertClientCPUUS), FormatRuns(r.InsertClientCPUUS))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ratios := make([]string, len(r.Ratios))
	for i, v := range r.Ratios {
		ratios[i] = fmt.Sprintf("%.2f", v)
	}
	fmt.Fprintf(w, "\nenqueue() / INSERT: %.2f (median of paired rounds: %s)\n", r.Ratio, strings.Join(ratios, ", "))
	fmt.Fprintf(w, "wake-ups heard by the subscription: %d; inserts counted for the relay: %d\n", r.WakeUps, r.Counted)
	if r.PickupJobs > 0 {
		fmt.Fprintf(w, "pickup of %d jobs enqueued from SQL at %s/s: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			r.PickupJobs, cli.HumanInt(r.PickupRate), r.Pickup.P50, r.Pickup.P95, r.Pickup.P99, r.Pickup.Max)
	}
	return nil
}

// Usage implements cli.Command.
func (c *BenchSQLEnqueueCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool bench sqlenqueue [flags]

PostgreSQL only. Measures the path of producers in other languages: --clients
sessions call <schema>.enqueue('bench', '{"n":1}'), one job per transaction,
for --duration, paired in each of --rounds with the same sessions running a
plain INSERT of the same row into a copy of spool_jobs (LIKE spool_jobs
INCLUDING ALL: columns, defaults and indexes, no trigger), while a worker's
subscription is open (--listen). The subscription has no worker, so its
relay of inserts from SQL polls as that of a client whose workers are all
busy, unless --idle-worker counts it as a client with an idle worker.
Prints both rates, the ratio of each round and their median. Then enqueues
jobs from SQL at --pickup-rate for --pickup-duration while a client works
them, and prints the pickup latency from each enqueue's commit (its reply)
to its handler's start.

Flags:

	--clients N
		sessions inserting at once (default 8)
	--duration DURATION
		how long each side inserts in each round (default 5s)
	--rounds N
		paired rounds (default 3)
	--listen BOOL
		keep a subscription open (default true)
	--idle-worker
		count the subscription as a client with an idle worker: its relay
		polls every millisecond
	--pickup-rate N
		jobs per second in the pickup phase; 0 skips it (default 1000)
	--pickup-duration DURATION
		how long the pickup phase enqueues (default 5s)
`+CommonUsage, "\n")
}
