package scenarios

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// A lab chaos worker process: a spool.Client over the store, whose
// handler records every start and return in an append-only audit log.

// chaosArgs is a chaos job. Effect jobs complete only with CompleteTx and an
// effect row; Fail jobs fail their first attempt; Stubborn jobs sleep
// without heeding their context (a handler that ignores cancellation).
type chaosArgs struct {
	Seq      int64 `json:"seq"`
	Effect   bool  `json:"effect,omitempty"`
	Fail     bool  `json:"fail,omitempty"`
	Stubborn bool  `json:"stubborn,omitempty"`
	SleepMS  int   `json:"sleep_ms"`
}

// Kind implements spool.JobArgs.
func (chaosArgs) Kind() string { return "spool_chaos" }

// chaosEffectsTable is the effect table; its rows are written in the same
// transaction as the job's completion.
const chaosEffectsTable = "spool_chaos_effects"

// auditLog is an append-only file written with one write() per record, so
// that a record the kernel accepted survives kill -9 of the process.
type auditLog struct{ f *os.File }

func openAuditLog(path string) (*auditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

// write appends one record. A failed write ends the process: a run whose
// audit has holes could not be checked.
func (l *auditLog) write(rec string) {
	if _, err := l.f.Write([]byte(rec)); err != nil {
		fmt.Fprintf(os.Stderr, "spool: lab chaos worker: write audit log: %v\n", err)
		os.Exit(3)
	}
}

// beatRecorder wraps a backend and records the leases each successful
// heartbeat extended, with a lower bound of their new end: the time the
// heartbeat was sent plus the lease (the store adds the lease to its clock
// when the statement runs, later).
type beatRecorder struct {
	backend.Backend
	// The workers under test keep the recorded store's lease rules (a
	// SQLite worker does not end its handler by its own clock) and its
	// way of writing step records.
	bench.Capabilities
	audit *auditLog
	proc  string
}

// JobClaim implements backend.Backend, recording the jobs claimed, so that
// the checker knows which jobs a killed or stopped process held.
func (b *beatRecorder) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := b.Backend.JobClaim(ctx, p)
	if len(rows) > 0 {
		b.audit.write(formatClaim(time.Now(), b.proc, rows))
	}
	return rows, err
}

// JobHeartbeatMany implements backend.Backend.
func (b *beatRecorder) JobHeartbeatMany(ctx context.Context, p *backend.JobHeartbeatManyParams) (*backend.JobHeartbeatManyResult, error) {
	sent := time.Now()
	res, err := b.Backend.JobHeartbeatMany(ctx, p)
	if err != nil {
		return res, err
	}
	lost := make(map[backend.LeaseRef]bool, len(res.Lost))
	for _, l := range res.Lost {
		lost[l] = true
	}
	kept := make([]backend.LeaseRef, 0, len(p.Leases))
	for _, l := range p.Leases {
		if !lost[l] {
			kept = append(kept, l)
		}
	}
	if len(kept) > 0 {
		b.audit.write(formatBeat(sent.Add(p.Lease), kept))
	}
	return res, nil
}

// effectWriter writes the effect rows of jobs (one per lease, under its
// fence) and, with complete, their completion, in one transaction of the
// store's own kind.
type effectWriter func(ctx context.Context, leases []backend.LeaseRef, proc string, complete func(tx any) error) error

// newEffectWriter returns the effect writer for be.
func newEffectWriter(be backend.Backend) (effectWriter, error) {
	insert := "INSERT INTO " + chaosEffectsTable + " (job_id, fence, proc) VALUES (?, ?, ?)"
	sqlWrite := func(ctx context.Context, tx *sql.Tx, leases []backend.LeaseRef, proc string, complete func(tx any) error) error {
		for _, l := range leases {
			if _, err := tx.ExecContext(ctx, insert, l.ID, l.Fence, proc); err != nil {
				return fmt.Errorf("write effect: %w", err)
			}
		}
		return complete(tx)
	}
	switch b := be.(type) {
	case *postgres.Backend:
		stmt := "INSERT INTO " + pgx.Identifier{b.Schema(), chaosEffectsTable}.Sanitize() + " (job_id, fence, proc) VALUES ($1, $2, $3)"
		return func(ctx context.Context, leases []backend.LeaseRef, proc string, complete func(tx any) error) error {
			return pgx.BeginFunc(ctx, b.Pool(), func(tx pgx.Tx) error {
				for _, l := range leases {
					if _, err := tx.Exec(ctx, stmt, l.ID, l.Fence, proc); err != nil {
						return fmt.Errorf("write effect: %w", err)
					}
				}
				return complete(tx)
			})
		}, nil
	case *mysql.Backend:
		return func(ctx context.Context, leases []backend.LeaseRef, proc string, complete func(tx any) error) error {
			return sqlTx(ctx, b.DB(), func(tx *sql.Tx) error { return sqlWrite(ctx, tx, leases, proc, complete) })
		}, nil
	case *sqlite.Backend:
		return func(ctx context.Context, leases []backend.LeaseRef, proc string, complete func(tx any) error) error {
			return b.WriteTx(ctx, func(tx *sql.Tx) error { return sqlWrite(ctx, tx, leases, proc, complete) })
		}, nil
	}
	return nil, fmt.Errorf("lab chaos: no effect writer for the %s backend", be.Name())
}

// sqlTx runs fn in a transaction of db, committing when it returns nil.
func sqlTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// errPlannedFailure is the first attempt's error of a Fail job.
var errPlannedFailure = errors.New("lab chaos: planned failure of the first attempt")

// chaosWorkerEnv is what a worker process's handlers share: the store and
// the audit log they record every start and return in.
type chaosWorkerEnv struct {
	be    backend.Backend
	audit *auditLog
	proc  string
}

// start records the start of job j's handler and returns the function that
// records its return. The start is the engine's (its last lease check), not
// the handler's first line: a process paused between the two would
// otherwise show a start no code could have prevented.
func (w *chaosWorkerEnv) start(ctx context.Context, j *backend.JobRow) (done func(), err error) {
	at, ok := spool.JobStartedAt(ctx)
	if !ok {
		return nil, errors.New("lab chaos worker: no start time in the job's context")
	}
	start := chaosStart{ID: j.ID, Fence: j.Fence, Attempt: j.Attempt, Proc: w.proc, At: at}
	if j.LeasedUntil != nil {
		start.LeasedUntil = *j.LeasedUntil
	}
	// The lease the database holds now: a heartbeat or a stall credit
	// (SQLite) may have extended the claim's.
	if row, err := w.be.JobGet(ctx, j.ID); err == nil && row.Fence == j.Fence && row.State == backend.StateRunning && row.LeasedUntil != nil {
		start.DBLeasedUntil = *row.LeasedUntil
	}
	w.audit.write(formatStart(start))
	return func() { w.audit.write(formatEnd(chaosEnd{ID: j.ID, Fence: j.Fence, Proc: w.proc, At: time.Now()})) }, nil
}

// runChaosWorker is the worker process: it works the store's default queue
// until SIGTERM or SIGINT, then stops softly.
func runChaosWorker(ctx context.Context, m *cli.Env, args []string) error {
	fs := flag.NewFlagSet("chaos worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_ = fs.Bool("worker", true, "")
	dsn := fs.String("database-url", "", "")
	proc := fs.String("proc", "", "")
	auditPath := fs.String("audit", "", "")
	concurrency := fs.Int("concurrency", 8, "")
	lease := fs.Duration("lease", 3*time.Second, "")
	stopTimeout := fs.Duration("stop-timeout", 2*time.Second, "")
	compose := fs.Bool("compose", false, "")
	debounceKeys := fs.Int("debounce-keys", 0, "")
	debounceUntil := fs.Int64("debounce-until", 0, "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("lab chaos worker: %w", err)
	}
	if *dsn == "" || *proc == "" || *auditPath == "" {
		return errors.New("lab chaos worker: --database-url, --proc and --audit are required")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	audit, err := openAuditLog(*auditPath)
	if err != nil {
		return err
	}
	// A worker started while the server restarts waits for it (backend.Open
	// tries again while the server is unreachable), a bounded time.
	openCtx, cancelOpen := context.WithTimeout(ctx, 30*time.Second)
	be, err := backend.Open(openCtx, *dsn)
	cancelOpen()
	if err != nil {
		return fmt.Errorf("lab chaos worker: %w", err)
	}
	// The exit's steps are timed on stderr, which the parent shows when a
	// worker is slow to stop: Stop, then the backend's Close.
	var termAt time.Time
	defer func() {
		closeAt := time.Now()
		_ = be.Close()
		if !termAt.IsZero() {
			fmt.Fprintf(m.Stderr, "lab chaos worker %s: SIGTERM → Stop returned %s, Close took %s\n",
				*proc, closeAt.Sub(termAt).Round(time.Millisecond), time.Since(closeAt).Round(time.Millisecond))
		}
	}()
	writeEffect, err := newEffectWriter(be)
	if err != nil {
		return err
	}
	ws := spool.NewWorkers()
	env := &chaosWorkerEnv{be: be, audit: audit, proc: *proc}
	if err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[chaosArgs]) error {
		done, err := env.start(ctx, j.JobRow)
		if err != nil {
			return err
		}
		defer done()
		if j.Args.Stubborn {
			audit.write(formatStubborn(j.ID, *proc))
			time.Sleep(time.Duration(j.Args.SleepMS) * time.Millisecond)
			return nil
		}
		if err := pause(ctx, time.Duration(j.Args.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		if j.Args.Fail && j.Attempt == 1 {
			return errPlannedFailure
		}
		if j.Args.Effect {
			return writeEffect(ctx, []backend.LeaseRef{j.Lease()}, *proc, func(tx any) error { return spool.CompleteTx(ctx, tx, j) })
		}
		return nil
	})); err != nil {
		return err
	}
	queues := map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: *concurrency}}
	if *compose {
		if err := addComposeWorkers(ws, env, writeEffect); err != nil {
			return err
		}
		queues[composeQueue] = spool.QueueConfig{MaxWorkers: composeConcurrency}
		queues[composeStepsQueue] = spool.QueueConfig{MaxWorkers: composeConcurrency}
		queues[composeDebounceQueue] = spool.QueueConfig{MaxWorkers: composeDebounceSlots}
	}
	stderr := &bench.LockedWriter{W: m.Stderr}
	client, err := spool.NewClient(bench.KeepNotifier(&beatRecorder{Backend: be, Capabilities: bench.Capabilities{Of: be}, audit: audit, proc: *proc}, be), &spool.Config{
		ClientID:           *proc,
		Workers:            ws,
		Queues:             queues,
		LeaseDuration:      *lease,
		CompletedRetention: 24 * time.Hour, // the checker reads every completed row
		RetryPolicy:        spool.ConstantRetryPolicy{Delay: 200 * time.Millisecond},
		Logger:             bench.Logger(stderr),
	})
	if err != nil {
		return fmt.Errorf("lab chaos worker: %w", err)
	}
	// Start may fail while the server restarts: retry for a bounded time.
	var startErr error
	for i := 0; i < 120; i++ {
		if startErr = client.Start(ctx); startErr == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if startErr != nil {
		return fmt.Errorf("lab chaos worker: %w", startErr)
	}
	if *debounceKeys > 0 {
		go insertDebounced(ctx, client, *proc, *debounceKeys, time.Unix(0, *debounceUntil))
	}
	<-ctx.Done()
	// Stop must return by its deadline even if a handler ignores its
	// context; the parent counts a worker that takes longer as a slow stop.
	termAt = time.Now()
	stopCtx, cancel := context.WithTimeout(context.Background(), *stopTimeout)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("lab chaos worker: stop: %w", err)
	}
	return nil
}
