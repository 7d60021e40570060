package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

func harness(mode pgx.QueryExecMode) conformance.Harness {
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return newBackendWithMode(t, mode) },
		NewUnmigrated: func(t *testing.T) backend.Backend {
			pool := testdb.PostgresPoolWithMode(t, mode)
			return newUnmigratedOn(t, pool, &postgres.Options{Schema: unmigratedSchema(t, pool)})
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			// A second pool, as another process would have.
			other, err := postgres.New(testdb.PostgresPool(t), &postgres.Options{Schema: be.(*postgres.Backend).Schema()})
			if err != nil {
				t.Fatal(err)
			}
			return other
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*postgres.Backend), gate}
		},
		Lock: lockStore,
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			tx, err := be.(*postgres.Backend).Pool().Begin(context.Background())
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		},
	}
}

// TestConformance runs the suite with pgx's default, cached statements.
// Each mode of the suite (and TestSharded's) is a parallel test, so their
// tests run side by side and the package's parallel tests with them: each
// test has a schema of its own, and conformance.MaxParallel bounds how
// many of the suite's tests run at once over all the modes (TestMain sets
// -parallel to it).
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, harness(pgx.QueryExecModeCacheStatement))
}

// TestConformanceSimpleProtocol runs the suite with pgx's simple protocol,
// as behind PgBouncer in transaction mode before version 1.21.
func TestConformanceSimpleProtocol(t *testing.T) {
	t.Parallel()
	conformance.Run(t, harness(pgx.QueryExecModeSimpleProtocol))
}

// TestConformanceLeaseRows runs the suite with every claim into lease rows
// (with the default, a queue whose claims take few jobs keeps them in
// place), claims side by side without the queue's claim lock
// (spool_claim_lock=off) and wake-ups not routed (spool_wake_routing=off:
// every process answers every wake-up). The default mode takes the lock
// for claims into lease rows and routes wake-ups; the lock and the
// routing act before a claim and after a commit, whichever form the claim
// takes, so one mode covers the three settings that are not the defaults
// (one run of the suite less in CI).
func TestConformanceLeaseRows(t *testing.T) {
	t.Parallel()
	conformance.Run(t, harnessWith(postgres.Options{Claims: postgres.ClaimsLeaseRows, ClaimLock: postgres.ClaimLockOff, WakeRouting: postgres.WakeRoutingOff}))
}

// TestConformanceOptimistic runs the suite with the optimistic claim
// strategy (spool_claim=optimistic), kept for comparison with MySQL.
func TestConformanceOptimistic(t *testing.T) {
	t.Parallel()
	conformance.Run(t, harnessWith(postgres.Options{ClaimStrategy: postgres.StrategyOptimistic}))
}

// harnessWith is the cached-statement harness with backends built with
// opts (its Schema set per test).
func harnessWith(opts postgres.Options) conformance.Harness {
	h := harness(pgx.QueryExecModeCacheStatement)
	open := func(t *testing.T, pool *pgxpool.Pool, schema string) backend.Backend {
		o := opts
		o.Schema = schema
		be, err := postgres.New(pool, &o)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	h.NewBackend = func(t *testing.T) backend.Backend {
		be := newBackend(t)
		return open(t, be.Pool(), be.Schema())
	}
	h.Reopen = func(t *testing.T, be backend.Backend) backend.Backend {
		return open(t, testdb.PostgresPool(t), be.(*postgres.Backend).Schema())
	}
	h.NewUnmigrated = func(t *testing.T) backend.Backend {
		pool := testdb.PostgresPool(t)
		o := opts
		o.Schema = unmigratedSchema(t, pool)
		return newUnmigratedOn(t, pool, &o)
	}
	return h
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := testdb.PostgresPool(t)
	schema := testdb.NewSchemaName()
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be, err := postgres.New(pool, &postgres.Options{Schema: schema})
			if err == nil {
				err = be.Migrate(context.Background())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	var versions int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".spool_migrations").Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != postgres.LatestVersion() {
		t.Fatalf("%d migration rows, want %d", versions, postgres.LatestVersion())
	}
	be, _ := postgres.New(pool, &postgres.Options{Schema: schema})
	if v, err := be.SchemaVersion(context.Background()); err != nil || v.Check() != nil || v.Current != postgres.LatestVersion() {
		t.Fatalf("schema version: %+v %v", v, err)
	}
}

func TestSchemaChecks(t *testing.T) {
	t.Parallel()
	pool := testdb.PostgresPool(t)
	for _, bad := range []string{"", "Spool", "1abc", "a-b", "a;drop", `a"b`, strings.Repeat("a", 64), "sp ool"} {
		if _, err := postgres.New(pool, &postgres.Options{Schema: bad}); !errors.Is(err, postgres.ErrInvalidSchema) {
			if bad == "" && err == nil {
				continue // empty means the default
			}
			t.Errorf("schema %q: err = %v", bad, err)
		}
	}
	ctx := context.Background()
	// Not migrated: a client refuses to start, with a typed error.
	be, err := postgres.New(pool, &postgres.Options{Schema: testdb.NewSchemaName()})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != 0 || !errors.Is(v.Check(), backend.ErrSchemaNotMigrated) {
		t.Fatalf("unmigrated: %+v %v", v, err)
	}
	// Newer than this code: refused by Start and by Migrate.
	be = newBackend(t)
	if _, err := pool.Exec(ctx, "INSERT INTO "+be.Schema()+".spool_migrations (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[conformance.NoteArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); !errors.Is(err, spool.ErrSchemaTooNew) {
		t.Fatalf("start on newer schema: %v", err)
	}
	if err := be.Migrate(ctx); !errors.Is(err, backend.ErrSchemaTooNew) {
		t.Fatalf("migrate on newer schema: %v", err)
	}
}

func TestOpenDSN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.NewSchemaName()
	// A server setting in the URL's options, with a space (%20) that the
	// parameters Open takes out must not turn into a '+'.
	dsn := testdb.PostgresURL() + "&" + postgres.SchemaParam + "=" + schema + "&options=-c%20lock_timeout%3D1234"
	be, err := backend.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer be.Close()
	pg := be.(*postgres.Backend)
	t.Cleanup(func() {
		_, _ = testdb.PostgresPool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	if pg.Schema() != schema {
		t.Fatalf("schema = %s", pg.Schema())
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var idle, stmt string
	if err := pg.Pool().QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&idle); err != nil || idle != "1min" {
		t.Fatalf("idle_in_transaction_session_timeout = %q (%v)", idle, err)
	}
	if err := pg.Pool().QueryRow(ctx, "SHOW lock_timeout").Scan(&stmt); err != nil || stmt != "1234ms" {
		t.Fatalf("lock_timeout from the URL's options = %q (%v), want 1234ms", stmt, err)
	}
	if _, err := backend.Open(ctx, strings.Replace(dsn, "spool_schema="+schema, "spool_schema=Bad-Name", 1)); !errors.Is(err, postgres.ErrInvalidSchema) {
		t.Fatalf("bad schema in DSN: %v", err)
	}
	if _, err := backend.Open(ctx, "nosuch://x"); err == nil || !strings.Contains(err.Error(), "no backend for scheme") {
		t.Fatalf("unknown scheme: %v", err)
	}
}

// TestOpenClaimParam selects the claim strategy by URL; pessimistic stays
// the default, and bad values are refused.
func TestOpenClaimParam(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ params, want string }{
		{"", postgres.StrategyPessimistic},
		{"&spool_claim=pessimistic", postgres.StrategyPessimistic},
		{"&spool_claim=optimistic&spool_claim_window=3", postgres.StrategyOptimistic},
	} {
		be, err := postgres.Open(ctx, testdb.PostgresURL()+tc.params)
		if err != nil {
			t.Fatalf("%q: %v", tc.params, err)
		}
		if got := be.ClaimStrategy(); got != tc.want {
			t.Errorf("%q: strategy %s, want %s", tc.params, got, tc.want)
		}
		be.Close()
	}
	for _, bad := range []string{"&spool_claim=fast", "&spool_claim=optimistic&spool_claim_window=0", "&spool_claim_window=x"} {
		if be, err := postgres.Open(ctx, testdb.PostgresURL()+bad); err == nil {
			be.Close()
			t.Errorf("%q: opened", bad)
		}
	}
}

// TestSQLEnqueue enqueues from plain SQL inside a transaction, as another
// language would, and a Go worker runs the job.
func TestSQLEnqueue(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	ctx := context.Background()
	ran := make(chan conformance.NoteArgs, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		ran <- j.Args
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, Queues: map[string]spool.QueueConfig{"mail": {MaxWorkers: 1}}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	s := be.Schema()
	tx, err := be.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `SELECT `+s+`.enqueue('note', '{"n": 7}'::jsonb, queue => 'mail', priority => 3, tags => ARRAY['from-sql'])`).Scan(&id); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// PollInterval is an hour: only the NOTIFY sent at commit can wake the worker.
	select {
	case a := <-ran:
		if a.N != 7 {
			t.Fatalf("args = %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job enqueued from SQL did not run (no wake-up?)")
	}
	j, err := c.JobGet(ctx, id)
	if err != nil || j.Priority != 3 || j.Queue != "mail" || len(j.Tags) != 1 {
		t.Fatalf("row: %+v %v", j, err)
	}
	// Validation in SQL: each bad call raises 22023 and writes nothing.
	bad := []string{
		`SELECT ` + s + `.enqueue('')`,
		`SELECT ` + s + `.enqueue('note', queue => 'bad queue')`,
		`SELECT ` + s + `.enqueue('note', queue => 'x''; drop table x; --')`,
		`SELECT ` + s + `.enqueue('note', priority => -1)`,
		`SELECT ` + s + `.enqueue('note', max_attempts => 0)`,
		`SELECT ` + s + `.enqueue('note', tags => ARRAY['a b'])`,
		`SELECT ` + s + `.enqueue('note', metadata => '[1]')`,
		`SELECT ` + s + `.enqueue('note', jsonb_build_object('s', repeat('x', 1048576)))`,
	}
	for _, q := range bad {
		_, err := be.Pool().Exec(ctx, q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" {
			t.Errorf("%s: err = %v, want SQLSTATE 22023", q, err)
		}
	}
	// A raw INSERT that breaks the structural rules is refused by the
	// table's insert trigger, naming the rule, with SQLSTATE 23514 as a
	// CHECK constraint would.
	for q, rule := range map[string]string{
		`INSERT INTO ` + s + `.spool_jobs (kind, priority) VALUES ('note', 1000)`:                    "priority must be 0 to 100",
		`INSERT INTO ` + s + `.spool_jobs (kind, max_attempts) VALUES ('note', 0)`:                   "max_attempts must be 1 to 1000",
		`INSERT INTO ` + s + `.spool_jobs (kind, queue) VALUES ('note', '')`:                         "queue must be 1 to 128 characters",
		`INSERT INTO ` + s + `.spool_jobs (kind) VALUES ('')`:                                        "kind must be 1 to 255 characters",
		`INSERT INTO ` + s + `.spool_jobs (kind, metadata) VALUES ('note', '[]')`:                    "metadata must be a JSON object",
		`INSERT INTO ` + s + `.spool_jobs (kind, state) VALUES ('note', 'running')`:                  "leased_until must be set exactly when state is running",
		`INSERT INTO ` + s + `.spool_jobs (kind, unique_key, unique_states) VALUES ('note', 'k', 3)`: "unique_states must hold bits 0 to 3",
		`INSERT INTO ` + s + `.spool_jobs (kind, flow_key) VALUES ('note', '')`:                      "flow_key must be 1 to 255 bytes",
		`INSERT INTO ` + s + `.spool_jobs (kind) VALUES ('note'), ('note'), ('')`:                    "kind must be 1 to 255 characters",
	} {
		_, err := be.Pool().Exec(ctx, q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || !strings.Contains(pgErr.Message, rule) {
			t.Errorf("%s: err = %v, want SQLSTATE 23514 naming %q", q, err, rule)
		}
	}
	// The one good job may still be held in a lease row: its handler ran,
	// but its completion, which writes it back into spool_jobs, may not be
	// written yet. One statement counts both places in one snapshot.
	var n int
	if err := be.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM `+s+`.spool_jobs) + (SELECT count(*) FROM `+s+`.spool_leased_jobs)`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d jobs after bad calls, want 1 (%v)", n, err)
	}
}

// TestPollOnly works jobs with LISTEN off, as behind PgBouncer in
// transaction mode, including jobs inserted by another process.
func TestPollOnly(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	ctx := context.Background()
	ran := make(chan int, 10)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		ran <- j.Args.N
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, PollOnly: true, PollInterval: 20 * time.Millisecond,
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	var listeners int
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND query LIKE '%`+be.Schema()+`%'`).Scan(&listeners); err != nil || listeners != 0 {
		t.Fatalf("poll-only client listens: %d %v", listeners, err)
	}
	if _, err := be.Pool().Exec(ctx, `SELECT `+be.Schema()+`.enqueue('note', '{"n": 5}')`); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-ran:
		if n != 5 {
			t.Fatalf("ran %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("poll-only client did not pick up the job")
	}
}

// TestNotifyCoalesced checks that a bulk insert sends one notification per
// queue, not one per row, carrying the queue's lowest claim key of the
// statement ("QUEUE PRIORITY RUN_AT_US"), and that single inserts in one
// transaction fold into one notification per queue.
func TestNotifyCoalesced(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LISTEN "spool:`+be.Schema()+`"`); err != nil {
		t.Fatal(err)
	}
	c, _ := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	for _, n := range []int{50, 1000} { // INSERT … unnest and COPY
		params := make([]spool.InsertManyParams, n)
		for i := range params {
			q := "a"
			if i%2 == 1 {
				q = "b"
			}
			params[i] = spool.InsertManyParams{Args: conformance.NoteArgs{N: i}, InsertOpts: &spool.InsertOpts{Queue: q}}
		}
		res, err := c.InsertMany(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		lowest := map[string]int64{}
		listed := map[string]string{} // the queue's ids, as a notification lists them
		for _, r := range res {
			if id, ok := lowest[r.Queue]; !ok || r.ID < id {
				lowest[r.Queue] = r.ID
			}
			if listed[r.Queue] != "" {
				listed[r.Queue] += ","
			}
			listed[r.Queue] += strconv.FormatInt(r.ID, 10)
		}
		got := map[string]int{}
		for {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			f := strings.Fields(n.Payload)
			if len(f) != 3 && len(f) != 4 {
				t.Fatalf("notification %q: want QUEUE PRIORITY RUN_AT_US [IDS]", n.Payload)
			}
			got[f[0]]++
			var runAt time.Time
			if err := conn.QueryRow(ctx, `SELECT run_at FROM `+be.Schema()+`.spool_jobs WHERE id = $1`, lowest[f[0]]).Scan(&runAt); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%s 0 %d", f[0], runAt.UnixMicro())
			if len(res) <= 2*postgres.MaxNoticeIDs {
				// Every job listed (noticeIDs); more are not.
				want += " " + listed[f[0]]
			}
			if n.Payload != want {
				t.Errorf("notification %q, want %q (the queue's lowest key)", n.Payload, want)
			}
		}
		if got["a"] != 1 || got["b"] != 1 || len(got) != 2 {
			t.Fatalf("%d rows: notifications %v, want one per queue", n, got)
		}
	}

	// Twenty single inserts in one transaction, default run_at (the
	// transaction's start): identical payloads, folded at commit.
	tx, err := be.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for i := range 20 {
		q := "a"
		if i%2 == 1 {
			q = "b"
		}
		if _, err := c.InsertTx(ctx, tx, conformance.NoteArgs{N: i}, &spool.InsertOpts{Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		got[n.Payload]++
	}
	if len(got) != 2 {
		t.Fatalf("20 single inserts in one transaction: notifications %v, want one per queue", got)
	}
	for p, k := range got {
		if k != 1 {
			t.Errorf("notification %q sent %d times", p, k)
		}
	}
}

// TestCancelRunningJobPromptly: with LISTEN on, cancelling a running job
// cancels its context at once, not at the next heartbeat (10 s here).
func TestCancelRunningJobPromptly(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	ctx := context.Background()
	started := make(chan int64, 1)
	cancelled := make(chan error, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		started <- j.ID
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, LeaseDuration: 30 * time.Second, JobTimeout: -1,
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}, Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	res, err := c.Insert(ctx, conformance.NoteArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	admin, _ := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)}) // as the CLI would
	began := time.Now()
	if _, err := admin.JobCancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, spool.ErrLeaseLost) {
			t.Fatalf("cause = %v", cause)
		}
		t.Logf("running job cancelled %s after JobCancel", time.Since(began).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("running job not cancelled within 5s (waiting for the 10s heartbeat?)")
	}
	if j, _ := be.JobGet(ctx, res.ID); j.State != backend.StateCancelled {
		t.Fatalf("state %s", j.State)
	}
}

// TestSQLEnqueueLimits: enqueue applies the Go API's limits (docs/limits.md):
// args measured as compact JSON, at most 31 levels of nesting in args and
// metadata, run_at within 1970..9999.
func TestSQLEnqueueLimits(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	ctx := context.Background()
	s := be.Schema()
	nest := func(levels int) string {
		return `'` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `'::jsonb`
	}
	// 500,000 one-digit numbers: 1,000,001 bytes compact, 1,500,000 as
	// jsonb's re-spaced text.
	accepted := []string{
		`SELECT ` + s + `.enqueue('note', (SELECT jsonb_agg(i % 10) FROM generate_series(1, 500000) i))`,
		`SELECT ` + s + `.enqueue('note', ` + nest(31) + `)`,
		`SELECT ` + s + `.enqueue('note', metadata => jsonb_build_object('a', ` + nest(30) + `))`,
		`SELECT ` + s + `.enqueue('note', run_at => '1970-01-01 00:00:00+00')`,
		`SELECT ` + s + `.enqueue('note', run_at => '9999-12-31 23:59:59.999999+00')`,
	}
	for _, q := range accepted {
		if _, err := be.Pool().Exec(ctx, q); err != nil {
			t.Errorf("%.120s: %v", q, err)
		}
	}
	refused := map[string]string{
		`SELECT ` + s + `.enqueue('note', (SELECT jsonb_agg(i % 10) FROM generate_series(1, 530000) i))`: "args are 1060001 bytes as compact JSON, over the limit of 1048576",
		`SELECT ` + s + `.enqueue('note', ` + nest(32) + `)`:                                             "args nest arrays and objects 32 levels deep, over the limit of 31",
		`SELECT ` + s + `.enqueue('note', metadata => jsonb_build_object('a', ` + nest(31) + `))`:        "metadata nests arrays and objects 32 levels deep",
		`SELECT ` + s + `.enqueue('note', run_at => '1969-12-31 23:59:59+00')`:                           "run_at 1969-12-31",
		`SELECT ` + s + `.enqueue('note', run_at => '10000-01-01 00:00:00+00')`:                          "out of range 1970-01-01..9999-12-31",
	}
	for q, want := range refused {
		_, err := be.Pool().Exec(ctx, q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, want) {
			t.Errorf("%.120s: err = %v, want SQLSTATE 22023 saying %q", q, err, want)
		}
	}
	// jsonb cannot hold \u0000: PostgreSQL refuses the value with 22P05
	// while converting the call's argument, before enqueue runs
	// (docs/sql-enqueue.md says so).
	_, err := be.Pool().Exec(ctx, `SELECT `+s+`.enqueue('note', '{"s": "a\u0000b"}')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P05" {
		t.Errorf(`args with \u0000: err = %v, want SQLSTATE 22P05`, err)
	}
	var n int
	if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+s+`.spool_jobs`).Scan(&n); err != nil || n != len(accepted) {
		t.Fatalf("%d rows, want %d (%v)", n, len(accepted), err)
	}
}
