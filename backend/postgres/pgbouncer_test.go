package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

type pooledArgs struct{ N int }

func (pooledArgs) Kind() string { return "pooled" }

// Through PgBouncer in transaction mode (a pgbouncer of the test's own in
// front of the shared server): a plain Open is refused by the pooler, a
// pooled Open refuses a role without the server's timeouts, and with them
// jobs are inserted and worked; LISTEN through the pooler is found deaf by
// its probe (the client then polls), and a direct listen URL gives
// wake-ups again.
func TestThroughPgBouncer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	direct := testdb.PostgresURL()
	du, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	role := testdb.NewSchemaName() // a role and schema of the test's own
	schema := role
	db := du.Path[1:]
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`ALTER ROLE ` + role + ` SET idle_in_transaction_session_timeout = '60s'`,
		`ALTER ROLE ` + role + ` SET statement_timeout = '5min'`,
		`GRANT CREATE ON DATABASE ` + pgx.Identifier{db}.Sanitize() + ` TO ` + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, q := range []string{`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`, `DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Errorf("clean up: %s: %v", q, err)
			}
		}
		admin.Close(ctx)
	})
	// pgbouncer runs as the postgres user when the test is root: its
	// directory must be reachable by it (t.TempDir's parent is not).
	dir, err := os.MkdirTemp("", "spool-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bouncer, err := dbserver.StartPgBouncer(ctx, dir, du.Host, db, role, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer bouncer.Stop()
	// A failed test says how its PgBouncer fared, and gives its log (this
	// cleanup runs before the directory's removal, registered earlier).
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(bouncer.Report())
		}
	})
	via := func(user, params string) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&%s", user, bouncer.Port(), db, params)
	}

	// A plain Open sends session settings the pooler refuses.
	if be, err := postgres.Open(ctx, via(role, "spool_schema="+schema)); err == nil {
		be.Close()
		t.Fatal("a plain Open through PgBouncer in transaction mode succeeded; want the pooler's refusal of session settings")
	}
	// Through it, the server must apply the timeouts to the role itself.
	if be, err := postgres.Open(ctx, via("postgres", "spool_pooler=transaction&spool_schema="+schema)); !errors.Is(err, postgres.ErrPoolerTimeouts) {
		if be != nil {
			be.Close()
		}
		t.Fatalf("pooled Open as a role without timeouts: %v, want ErrPoolerTimeouts", err)
	}

	be, err := postgres.Open(ctx, via(role, "spool_pooler=transaction&spool_schema="+schema))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The subscription through the pooler hears nothing: Listen says so,
	// at once when it knows it goes through a pooler (spool_pooler), and
	// after its probe when it does not (a backend over a pool of the
	// caller's, which New cannot tell is pooled).
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	err = be.Listen(lctx, func() { t.Error("Listen through the pooler reported ready") }, func(backend.Wake) {})
	lcancel()
	if !errors.Is(err, backend.ErrNoWakeUps) || !strings.Contains(err.Error(), postgres.PoolerParam) {
		t.Fatalf("Listen through the pooler: %v, want ErrNoWakeUps naming %s", err, postgres.PoolerParam)
	}
	pcfg, err := pgxpool.ParseConfig(via(role, "default_query_exec_mode=simple_protocol"))
	if err != nil {
		t.Fatal(err)
	}
	ppool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ppool.Close()
	unknown, err := postgres.New(ppool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel = context.WithTimeout(ctx, 30*time.Second)
	err = unknown.Listen(lctx, func() { t.Error("Listen through the pooler reported ready") }, func(backend.Wake) {})
	lcancel()
	unknown.Close()
	if !errors.Is(err, backend.ErrNoWakeUps) || !strings.Contains(err.Error(), "probe") {
		t.Fatalf("Listen through the pooler, not told so: %v, want ErrNoWakeUps from its probe", err)
	}

	// Jobs inserted and worked through the pooler, found by polling.
	const jobs = 200
	var ran atomic.Int64
	done := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[pooledArgs]) error {
		if ran.Add(1) == jobs {
			close(done)
		}
		return nil
	}))
	logs := &conformance.LogBuffer{}
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10}},
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]spool.InsertManyParams, jobs)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: pooledArgs{N: i}}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%d of %d jobs ran through the pooler", ran.Load(), jobs)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// One warning, that the client polls; no statement failed through the
	// pooler.
	if out := logs.String(); strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "no wake-ups can reach this client") {
		t.Fatalf("the client's log through the pooler, want only the warning that it polls:\n%s", out)
	}

	// A direct connection for LISTEN gives wake-ups back: a job inserted
	// through the pooler reaches a client that polls hourly.
	listenURL := url.QueryEscape(fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", role, du.Host, db))
	wbe, err := postgres.Open(ctx, via(role, "spool_pooler=transaction&spool_schema="+schema+"&spool_listen_url="+listenURL))
	if err != nil {
		t.Fatal(err)
	}
	defer wbe.Close()
	woke := make(chan struct{}, 1)
	ws2 := spool.NewWorkers()
	spool.AddWorker(ws2, spool.WorkFunc(func(context.Context, *spool.Job[pooledArgs]) error {
		select {
		case woke <- struct{}{}:
		default:
		}
		return nil
	}))
	c2, err := spool.NewClient(wbe, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws2, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 10}}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c2.Stop(context.Background())
	if _, err := c.Insert(ctx, pooledArgs{N: -1}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("a job inserted through the pooler did not wake a client listening on a direct connection (it polls hourly)")
	}
}
