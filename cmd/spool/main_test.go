package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/cli/clitest"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// execMain runs a command line through the whole program.
func execMain(ctx context.Context, env *cli.Env, args []string) int {
	return (&Main{Env: *env}).Execute(ctx, args)
}

// runSpool runs the CLI in-process with args, as the spool binary would.
func runSpool(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, execMain, nil, args...)
}

// mustSpool runs the CLI and fails the test unless it exits 0.
func mustSpool(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.MustRun(t, execMain, args...)
}

// testDB returns a pool to the test server; a missing server fails the test.
func testDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.PostgresPool(t)
}

// withSchema returns the test server's URL with spool_schema set.
func withSchema(t *testing.T, schema string) string {
	t.Helper()
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatalf("parse test database URL: %v", err)
	}
	q := u.Query()
	q.Set(postgres.SchemaParam, schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// freshURL returns a database URL for a schema of the test's own, dropped
// when the test ends. The schema is created by spool migrate.
func freshURL(t *testing.T) string {
	t.Helper()
	pool := testDB(t)
	schema := testdb.NewSchemaName()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	return withSchema(t, schema)
}

// schemaExists reports whether a schema exists on the test server.
func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		t.Fatalf("look up schema %s: %v", schema, err)
	}
	return ok
}

func listJobs(t *testing.T, db string, args ...string) []jobJSON {
	t.Helper()
	r := mustSpool(t, append([]string{"jobs", "list", "--json", "--database-url", db}, args...)...)
	var jobs []jobJSON
	if err := json.Unmarshal([]byte(r.Stdout), &jobs); err != nil {
		t.Fatalf("jobs list --json output is not a JSON array of jobs: %v\n%s", err, r.Stdout)
	}
	return jobs
}

func TestMigrateEnqueueListShow(t *testing.T) {
	db := freshURL(t)

	latest := strconv.Itoa(postgres.LatestVersion())
	r := mustSpool(t, "migrate", "--database-url", db)
	if !strings.Contains(r.Stdout, "from version 0 to "+latest) {
		t.Errorf("first migrate should report version 0 to %s, got %q", latest, r.Stdout)
	}
	r = mustSpool(t, "migrate", "--database-url", db)
	if !strings.Contains(r.Stdout, "already at version "+latest) {
		t.Errorf("second migrate should report nothing to do, got %q", r.Stdout)
	}

	r = mustSpool(t, "enqueue", "--database-url", db, "--kind", "send_email",
		"--args", `{"to": "a@example.com", "n": 3}`, "--queue", "mail", "--priority", "7",
		"--max-attempts", "5", "--tag", "a", "--tag", "b:c", "--metadata", `{"trace": "x1"}`)
	id, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
	if err != nil {
		t.Fatalf("enqueue should print the bare id, got %q", r.Stdout)
	}

	r = mustSpool(t, "enqueue", "--database-url", db, "--kind", "later", "--delay", "1h", "--json")
	var enq struct {
		ID    int64  `json:"id"`
		Kind  string `json:"kind"`
		Queue string `json:"queue"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &enq); err != nil || enq.ID == 0 || enq.Kind != "later" || enq.Queue != "default" {
		t.Fatalf("enqueue --json: got %q (err %v)", r.Stdout, err)
	}
	runAt := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "at", "--run-at", runAt)

	// Table, newest first: the first job is the last row.
	r = mustSpool(t, "jobs", "list", "--database-url", db)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("jobs list: want a header and 3 rows, got:\n%s", r.Stdout)
	}
	for _, col := range []string{"ID", "QUEUE", "KIND", "STATE", "PRIORITY", "ATTEMPT", "RUN_AT", "CREATED_AT"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("jobs list header lacks %s: %q", col, lines[0])
		}
	}
	if f := strings.Fields(lines[3]); len(f) != 8 || f[0] != strconv.FormatInt(id, 10) || f[1] != "mail" ||
		f[2] != "send_email" || f[3] != "available" || f[4] != "7" || f[5] != "0/5" {
		t.Errorf("jobs list last row: got %q", lines[3])
	}

	// JSON and filters.
	jobs := listJobs(t, db, "--oldest-first")
	if len(jobs) != 3 {
		t.Fatalf("want 3 jobs, got %d", len(jobs))
	}
	j := jobs[0]
	if j.ID != id || j.Kind != "send_email" || j.Queue != "mail" || j.Priority != 7 || j.MaxAttempts != 5 ||
		strings.Join(j.Tags, ",") != "a,b:c" || string(j.State) != "available" {
		t.Errorf("job as listed: %+v", j)
	}
	var args map[string]any
	if err := json.Unmarshal(j.Args, &args); err != nil || args["to"] != "a@example.com" || args["n"] != float64(3) {
		t.Errorf("args as listed: %s", j.Args)
	}
	if jobs[1].State != "scheduled" || jobs[2].State != "scheduled" {
		t.Errorf("delayed jobs should be scheduled: %s, %s", jobs[1].State, jobs[2].State)
	}
	if got := listJobs(t, db, "--queue", "mail"); len(got) != 1 || got[0].ID != id {
		t.Errorf("--queue mail: got %d jobs", len(got))
	}
	if got := listJobs(t, db, "--state", "scheduled"); len(got) != 2 {
		t.Errorf("--state scheduled: got %d jobs, want 2", len(got))
	}
	if got := listJobs(t, db, "--state", "available", "--state", "running"); len(got) != 1 {
		t.Errorf("--state available --state running: got %d jobs, want 1", len(got))
	}
	if got := listJobs(t, db, "--kind", "later"); len(got) != 1 || got[0].Kind != "later" {
		t.Errorf("--kind later: got %+v", got)
	}
	if got := listJobs(t, db, "--after-id", strconv.FormatInt(id, 10), "--limit", "1"); len(got) != 1 || got[0].ID <= id {
		t.Errorf("--after-id %d --limit 1: got %+v", id, got)
	}

	// Show, text and JSON (flags after the id work too).
	r = mustSpool(t, "jobs", "show", strconv.FormatInt(id, 10), "--database-url", db)
	for _, want := range []string{"send_email", "mail", "available", "0/5", "a, b:c", `"to": "a@example.com"`, `"trace": "x1"`, "errors: none"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("jobs show lacks %q:\n%s", want, r.Stdout)
		}
	}
	r = mustSpool(t, "jobs", "show", "--json", "--database-url", db, strconv.FormatInt(id, 10))
	var shown jobJSON
	if err := json.Unmarshal([]byte(r.Stdout), &shown); err != nil || shown.ID != id || string(shown.Metadata) == "" {
		t.Fatalf("jobs show --json: %v\n%s", err, r.Stdout)
	}
	var meta map[string]string
	if err := json.Unmarshal(shown.Metadata, &meta); err != nil || meta["trace"] != "x1" {
		t.Errorf("metadata shown: %s", shown.Metadata)
	}

	if r := runSpool(t, "jobs", "show", "999999", "--database-url", db); r.Code != 1 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("jobs show of a missing id: want exit 1 and 'not found', got %d %q", r.Code, r.Stderr)
	}
}

func TestEnqueueInvalidWritesNothing(t *testing.T) {
	db := freshURL(t)
	mustSpool(t, "migrate", "--database-url", db)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"bad args JSON", []string{"--kind", "k", "--args", `{"to": `}, 2, "--args is not valid JSON"},
		{"args not JSON at all", []string{"--kind", "k", "--args", `to=a`}, 2, "--args is not valid JSON"},
		{"bad metadata JSON", []string{"--kind", "k", "--metadata", `{`}, 2, "--metadata is not valid JSON"},
		{"metadata not an object", []string{"--kind", "k", "--metadata", `[1]`}, 2, "--metadata must be a JSON object"},
		{"no kind", []string{"--args", `{}`}, 2, "--kind is required"},
		{"delay and run-at", []string{"--kind", "k", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, 2, "cannot be used together"},
		{"bad run-at", []string{"--kind", "k", "--run-at", "tomorrow"}, 2, "RFC 3339"},
		{"priority out of range", []string{"--kind", "k", "--priority", "101"}, 1, "priority"},
		{"bad queue", []string{"--kind", "k", "--queue", "-bad"}, 1, "queue"},
		{"bad tag", []string{"--kind", "k", "--tag", "has space"}, 1, "tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSpool(t, append([]string{"enqueue", "--database-url", db}, tc.args...)...)
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d", r.Code, tc.code)
			}
			if !strings.HasPrefix(r.Stderr, "spool: ") || !strings.Contains(r.Stderr, tc.message) {
				t.Errorf("stderr %q should start with 'spool: ' and mention %q", r.Stderr, tc.message)
			}
			if r.Stdout != "" {
				t.Errorf("nothing should be printed on stdout, got %q", r.Stdout)
			}
		})
	}
	if jobs := listJobs(t, db); len(jobs) != 0 {
		t.Fatalf("invalid enqueues wrote %d jobs", len(jobs))
	}
}

func TestRetryCancel(t *testing.T) {
	db := freshURL(t)
	mustSpool(t, "migrate", "--database-url", db)

	for _, op := range []string{"retry", "cancel"} {
		r := runSpool(t, "jobs", op, "424242", "--database-url", db)
		if r.Code != 1 {
			t.Errorf("jobs %s of a missing id: exit %d, want 1", op, r.Code)
		}
		if want := "spool: " + op + " job 424242: job not found"; !strings.Contains(r.Stderr, want) {
			t.Errorf("jobs %s of a missing id: stderr %q, want %q", op, r.Stderr, want)
		}
	}

	id := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "k").Stdout)
	r := mustSpool(t, "jobs", "cancel", id, "--database-url", db)
	if !strings.Contains(r.Stdout, "cancelled") {
		t.Errorf("cancel output: %q", r.Stdout)
	}
	r = runSpool(t, "jobs", "cancel", id, "--database-url", db)
	if r.Code != 1 || !strings.Contains(r.Stderr, "already cancelled") {
		t.Errorf("cancelling a cancelled job: want exit 1 and 'already cancelled', got %d %q", r.Code, r.Stderr)
	}
	r = mustSpool(t, "jobs", "retry", id, "--database-url", db, "--json")
	var j jobJSON
	if err := json.Unmarshal([]byte(r.Stdout), &j); err != nil || j.State != "available" || j.Attempt != 0 {
		t.Errorf("retry --json: %v %+v", err, j)
	}

	if r := runSpool(t, "jobs", "retry", "--database-url", db); r.Code != 2 || !strings.Contains(r.Stderr, "missing job id") {
		t.Errorf("retry without id: want exit 2, got %d %q", r.Code, r.Stderr)
	}
	if r := runSpool(t, "jobs", "cancel", "x1", "--database-url", db); r.Code != 2 {
		t.Errorf("cancel with a bad id: want exit 2, got %d", r.Code)
	}
}

func TestQueues(t *testing.T) {
	db := freshURL(t)
	mustSpool(t, "migrate", "--database-url", db)
	if r := mustSpool(t, "queues", "--database-url", db, "--json"); strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("queues of an empty schema: got %q, want []", r.Stdout)
	}
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "alpha")
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "alpha")
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "alpha", "--delay", "1h")
	id := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "beta").Stdout)
	mustSpool(t, "jobs", "cancel", id, "--database-url", db)

	r := mustSpool(t, "queues", "--database-url", db, "--json")
	var qs []struct {
		Queue  string           `json:"queue"`
		Counts map[string]int64 `json:"counts"`
		Total  int64            `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &qs); err != nil {
		t.Fatalf("queues --json: %v", err)
	}
	if len(qs) != 2 || qs[0].Queue != "alpha" || qs[1].Queue != "beta" {
		t.Fatalf("queues: got %+v", qs)
	}
	if c := qs[0].Counts; c["available"] != 2 || c["scheduled"] != 1 || len(c) != 8 || qs[0].Total != 3 {
		t.Errorf("alpha counts: %+v total %d", c, qs[0].Total)
	}
	if c := qs[1].Counts; c["cancelled"] != 1 || qs[1].Total != 1 {
		t.Errorf("beta counts: %+v total %d", c, qs[1].Total)
	}
	// Lifecycle order in the JSON object, too.
	if i, j := strings.Index(r.Stdout, `"available"`), strings.Index(r.Stdout, `"cancelled"`); i < 0 || j < i {
		t.Errorf("counts not in lifecycle order:\n%s", r.Stdout)
	}

	r = mustSpool(t, "queues", "--database-url", db)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("queues table: want header and 2 rows:\n%s", r.Stdout)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "QUEUE WAITING AVAILABLE SCHEDULED RETRYABLE RUNNING COMPLETED DISCARDED CANCELLED TOTAL PAUSED" {
		t.Errorf("queues header: %q", lines[0])
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "alpha 0 2 1 0 0 0 0 0 3 -" {
		t.Errorf("alpha row: %q", got)
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "beta 0 0 0 0 0 0 0 1 1 -" {
		t.Errorf("beta row: %q", got)
	}
}

func TestBenchDrain(t *testing.T) {
	pool := testDB(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"keep completed", nil},
		{"delete completed", []string{"--delete-completed", "--insert-fast", "--workers", "20", "--prefetch", "0", "--batch", "100", "--completion-delay", "2ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"bench", "drain", "--jobs", "2000", "--json", "--insert-chunk", "700",
				"--database-url", testdb.PostgresURL()}, tc.extra...)
			r := mustSpool(t, args...)
			var res map[string]any
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
				t.Fatalf("bench drain --json must print only a JSON object: %v\n%s", err, r.Stdout)
			}
			if res["jobs"] != float64(2000) {
				t.Errorf("jobs = %v, want 2000", res["jobs"])
			}
			for _, k := range []string{"jobs_per_s", "insert_jobs_per_s", "seconds"} {
				if v, ok := res[k].(float64); !ok || v <= 0 {
					t.Errorf("%s = %v, want > 0", k, res[k])
				}
			}
			for _, k := range []string{"workers", "prefetch", "batch", "completion_delay", "delete_completed", "backend"} {
				if _, ok := res[k]; !ok {
					t.Errorf("result lacks setting %q", k)
				}
			}
			if res["backend"] != "postgres" || res["delete_completed"] != (len(tc.extra) > 0) {
				t.Errorf("settings: %v", res)
			}
			schema, _ := res["store"].(string)
			if !strings.HasPrefix(schema, "spool_bench_") {
				t.Fatalf("store = %q, want spool_bench_…", schema)
			}
			if schemaExists(t, pool, schema) {
				t.Errorf("bench schema %s still exists after the run", schema)
				_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			}
			if !strings.Contains(r.Stderr, "drain: 2,000/2,000 100.0%") {
				t.Errorf("stderr should carry plain progress lines when it is not a terminal:\n%s", r.Stderr)
			}
		})
	}

	t.Run("table and keep", func(t *testing.T) {
		r := mustSpool(t, "bench", "drain", "--jobs", "300", "--keep", "--quiet", "--database-url", testdb.PostgresURL())
		for _, want := range []string{"jobs", "300", "jobs/s", "insert jobs/s", "workers", "100", "prefetch", "3000",
			"batch", "2000", "completion delay", "delete completed", "backend", "postgres"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("table lacks %q:\n%s", want, r.Stdout)
			}
		}
		i := strings.Index(r.Stderr, "spool_bench_")
		if i < 0 {
			t.Fatalf("--keep should name the kept schema on stderr: %q", r.Stderr)
		}
		schema := r.Stderr[i : i+len("spool_bench_")+12]
		if !schemaExists(t, pool, schema) {
			t.Errorf("--keep: schema %s is gone", schema)
		}
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop kept schema: %v", err)
		}
	})

	if r := runSpool(t, "bench", "drain", "--database-url", testdb.PostgresURL()); r.Code != 2 || !strings.Contains(r.Stderr, "--jobs") {
		t.Errorf("bench drain without --jobs: want exit 2 naming --jobs, got %d %q", r.Code, r.Stderr)
	}
}

func TestDatabaseURLChoice(t *testing.T) {
	// Neither flag nor environment: the SQLite file ./spool.db, said so on
	// stderr; unmigrated, a command says to migrate.
	t.Setenv(cli.EnvDatabaseURL, "")
	dir := t.TempDir()
	t.Chdir(dir)
	r := runSpool(t, "queues")
	if r.Code != 1 || !strings.Contains(r.Stderr, filepath.Join(dir, "spool.db")) || !strings.Contains(r.Stderr, "spool migrate") {
		t.Errorf("no database, not migrated: want exit 1 naming ./spool.db and spool migrate, got %d %q", r.Code, r.Stderr)
	}
	mustSpool(t, "migrate")
	mustSpool(t, "enqueue", "--kind", "local")
	if r := mustSpool(t, "jobs", "list", "--json"); !strings.Contains(r.Stdout, `"kind": "local"`) && !strings.Contains(r.Stdout, `"kind":"local"`) {
		t.Errorf("default store: jobs list = %q", r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "spool.db")); err != nil {
		t.Errorf("default store file: %v", err)
	}

	db := freshURL(t)
	t.Setenv(cli.EnvDatabaseURL, db)
	mustSpool(t, "migrate") // from the environment
	mustSpool(t, "enqueue", "--kind", "from_env")
	if jobs := listJobs(t, db); len(jobs) != 1 || jobs[0].Kind != "from_env" {
		t.Errorf("enqueue through %s: got %+v", cli.EnvDatabaseURL, jobs)
	}

	// The flag wins over the environment.
	t.Setenv(cli.EnvDatabaseURL, "nosuchscheme://x")
	mustSpool(t, "queues", "--database-url", db)
	if r := runSpool(t, "queues"); r.Code != 1 || !strings.Contains(r.Stderr, "nosuchscheme") {
		t.Errorf("bad URL from the environment: want exit 1 naming the scheme, got %d %q", r.Code, r.Stderr)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // expected in stdout (code 0) or stderr
	}{
		{nil, 2, "Usage:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"help"}, 0, "Commands:"},
		{[]string{"-h"}, 0, "Commands:"},
		{[]string{"help", "jobs", "list"}, 0, "Usage: spool jobs list"},
		{[]string{"migrate", "-h"}, 0, "Usage: spool migrate"},
		{[]string{"enqueue", "--help"}, 0, "Usage: spool enqueue"},
		{[]string{"jobs", "show", "-h"}, 0, "Usage: spool jobs show"},
		{[]string{"bench", "drain", "-h"}, 0, "Usage: spool bench drain"},
		{[]string{"queues", "-h"}, 0, "Usage: spool queues"},
		{[]string{"jobs"}, 2, "missing subcommand"},
		{[]string{"jobs", "frob"}, 2, `unknown subcommand "frob"`},
		{[]string{"bench", "frob"}, 2, `unknown scenario "frob"`},
		{[]string{"queues", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"jobs", "list", "--state", "done"}, 2, `unknown state "done"`},
		{[]string{"version"}, 0, "spool "},
	} {
		r := runSpool(t, tc.args...)
		if r.Code != tc.code {
			t.Errorf("spool %v: exit %d, want %d", tc.args, r.Code, tc.code)
		}
		got := r.Stderr
		if tc.code == 0 {
			got = r.Stdout
		}
		if !strings.Contains(got, tc.out) {
			t.Errorf("spool %v: output %q lacks %q", tc.args, got, tc.out)
		}
		if tc.code == 2 && !strings.HasPrefix(r.Stderr, "spool: ") && len(tc.args) > 0 {
			t.Errorf("spool %v: usage error should print 'spool: <err>', got %q", tc.args, r.Stderr)
		}
	}
}
