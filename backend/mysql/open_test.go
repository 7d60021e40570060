package mysql_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version             string
		mariaDB, skipLocked bool
	}{
		{"10.11.19-MariaDB-0+deb12u1", true, true},
		{"10.6.0-MariaDB", true, true},
		{"10.5.23-MariaDB-log", true, false},
		{"5.5.5-10.4.32-MariaDB", true, false},
		{"5.5.5-10.6.16-MariaDB-1:10.6.16+maria~ubu2004", true, true},
		{"11.4.2-MariaDB-ubu2404", true, true},
		{"8.0.36", false, true},
		{"8.0.0-dmr", false, false},
		{"8.0.1", false, true},
		{"5.7.44-log", false, false},
		{"9.1.0", false, true},
		{"garbage", false, false},
		{"", false, false},
	} {
		m, s := mysql.ParseVersion(tc.version)
		if m != tc.mariaDB || s != tc.skipLocked {
			t.Errorf("%q: mariadb %v skip locked %v, want %v %v", tc.version, m, s, tc.mariaDB, tc.skipLocked)
		}
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	cfg, opts, err := mysql.ParseURL("mysql://u:p%40ss@db.example:3307/app?spool_claim=optimistic&spool_claim_window=5&spool_max_conns=4&tls=skip-verify&timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "u" || cfg.Passwd != "p@ss" || cfg.Addr != "db.example:3307" || cfg.DBName != "app" || cfg.TLSConfig != "skip-verify" || cfg.Timeout != 3*time.Second {
		t.Fatalf("config: %+v", cfg)
	}
	if opts.ClaimStrategy != mysql.StrategyOptimistic || opts.ClaimWindow != 5 || opts.MaxConns != 4 {
		t.Fatalf("options: %+v", opts)
	}
	if _, ok := cfg.Params[mysql.ClaimParam]; ok {
		t.Fatal("spool_claim reached the driver as a session variable")
	}
	cfg, _, err = mysql.ParseURL("mysql://root@localhost/test")
	if err != nil || cfg.Addr != "localhost:3306" {
		t.Fatalf("default port: %+v %v", cfg, err)
	}
	for _, bad := range []string{
		"postgres://x/y", "mysql://root@127.0.0.1:3306/", "mysql://root@h/db?spool_claim_window=0",
		"mysql://root@h/db?spool_max_conns=x", "mysql://root@h/db?timeout=soon", "mysql://%zz",
	} {
		if _, _, err := mysql.ParseURL(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestOpenSessions checks what every session of the backend runs with:
// strict mode (no silent truncation), UTC, READ COMMITTED, and that the
// database name is validated before it reaches SQL.
func TestOpenSessions(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	if be.ClaimStrategy() != mysql.StrategyPessimistic {
		t.Fatalf("auto strategy on %s: %s", be.ServerVersion(), be.ClaimStrategy())
	}
	// Every pooled connection, not only the first: hold several at once.
	var conns []func() error
	for i := 0; i < 4; i++ {
		conn, err := be.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn.Close)
		var mode, tz, iso string
		if err := conn.QueryRowContext(ctx, `SELECT @@SESSION.sql_mode, @@SESSION.time_zone`).Scan(&mode, &tz); err != nil {
			t.Fatal(err)
		}
		// MySQL 8 and MariaDB 11.1+ name it transaction_isolation.
		if err := conn.QueryRowContext(ctx, `SELECT @@SESSION.transaction_isolation`).Scan(&iso); err != nil {
			if err := conn.QueryRowContext(ctx, `SELECT @@SESSION.tx_isolation`).Scan(&iso); err != nil {
				t.Fatal(err)
			}
		}
		if mode != mysql.SessionSQLMode || tz != "+00:00" || iso != "READ-COMMITTED" {
			t.Fatalf("connection %d: sql_mode %q time_zone %q isolation %q", i, mode, tz, iso)
		}
	}
	for _, c := range conns {
		_ = c()
	}
	// Strict mode: an oversized value is an error, never truncated.
	_, err := be.DB().ExecContext(ctx, "INSERT INTO spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at) "+
		"VALUES (?, 'k', '{}', 0, UTC_TIMESTAMP(6), 'available', 1, '[]', '{}', UTC_TIMESTAMP(6))", strings.Repeat("q", 129))
	if err == nil || !strings.Contains(err.Error(), "1406") {
		t.Fatalf("129-character queue through a backend session: %v, want error 1406 (data too long)", err)
	}
	for _, bad := range []string{"a;b", "a`b", "a b", strings.Repeat("d", 65), "a.b"} {
		if _, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(bad, nil)); !errors.Is(err, mysql.ErrInvalidDatabase) {
			t.Errorf("database %q: %v", bad, err)
		}
	}
	for _, params := range []url.Values{{mysql.ClaimParam: {"fast"}}, {mysql.WindowParam: {"-1"}}} {
		if be, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(be.Database(), params)); err == nil {
			be.Close()
			t.Errorf("%v: opened", params)
		}
	}
	if be, err := backend.Open(ctx, testdb.MySQLDatabaseURL(be.Database(), nil)); err != nil || be.Name() != "mysql" {
		t.Fatalf("backend.Open by scheme: %v", err)
	} else {
		be.Close()
	}
}

// TestNoSkipLockedFallback plays a server without SKIP LOCKED (MariaDB
// 10.5): auto falls back to the optimistic strategy with a logged notice and
// works; asking for pessimistic claims is refused.
func TestNoSkipLockedFallback(t *testing.T) {
	t.Parallel()
	db := testdb.NewMySQLDatabase(t)
	ctx := context.Background()
	var logs conformance.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	be, err := mysql.OpenWithVersion(ctx, testdb.MySQLDatabaseURL(db, nil), "10.5.23-MariaDB", logger)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.ClaimStrategy() != mysql.StrategyOptimistic {
		t.Fatalf("strategy %s on a server without SKIP LOCKED", be.ClaimStrategy())
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "no SELECT … SKIP LOCKED") ||
		!strings.Contains(out, "strategy=optimistic") || !strings.Contains(out, "10.5.23-MariaDB") {
		t.Fatalf("notice not logged: %q", out)
	}
	if _, err := mysql.OpenWithVersion(ctx, testdb.MySQLDatabaseURL(db, url.Values{mysql.ClaimParam: {"pessimistic"}}), "5.7.44", logger); !errors.Is(err, mysql.ErrNoSkipLocked) {
		t.Fatalf("pessimistic on 5.7: %v", err)
	}
	// The fallback backend works end to end, rescue included (which then
	// locks without SKIP LOCKED).
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		ran <- j.Args.N
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: logger, PollInterval: 20 * time.Millisecond,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Millisecond, ClaimID: "dead"}); err != nil {
		t.Fatal(err)
	}
	id, err := c.Insert(ctx, conformance.NoteArgs{N: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Millisecond, ClaimID: "dead"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	select {
	case n := <-ran:
		if n != 5 {
			t.Fatalf("ran %d", n)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the rescued job never ran")
	}
	j, err := be.JobGet(ctx, id.ID)
	if err != nil || j.Attempt != 2 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "dead") {
		t.Fatalf("rescued job: %+v %v", j, err)
	}
}

// TestMigrateConcurrently starts many migrations of one database at once:
// the named lock lets one apply and the rest find nothing to do.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	db := testdb.NewMySQLDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		be := openBackend(t, db, nil)
		wg.Go(func() { errs <- be.Migrate(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	be := openBackend(t, db, nil)
	var versions int
	if err := be.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM spool_migrations").Scan(&versions); err != nil || versions != mysql.LatestVersion() {
		t.Fatalf("%d migration rows (%v), want %d", versions, err, mysql.LatestVersion())
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Check() != nil {
		t.Fatalf("schema version: %+v %v", v, err)
	}
	// Migrating again changes nothing.
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaChecks: a client refuses an unmigrated database and one newer
// than this code, with typed errors; Migrate refuses the newer one too.
func TestSchemaChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if v, err := fresh.SchemaVersion(ctx); err != nil || v.Current != 0 || !errors.Is(v.Check(), backend.ErrSchemaNotMigrated) {
		t.Fatalf("unmigrated: %+v %v", v, err)
	}
	be := newBackend(t, nil)
	if _, err := be.DB().ExecContext(ctx, "INSERT INTO spool_migrations (version, name, applied_at) VALUES (999, 'future', UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[conformance.NoteArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}, Logger: conformance.TestLogger(t, slog.LevelWarn)})
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
