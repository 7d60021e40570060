package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestSignup runs the service on PostgreSQL in a schema of its own: a
// signup's welcome email runs; a signup that fails, before the job's insert
// (a duplicate email) or after it (an unknown referrer), leaves no user and
// no job.
func TestSignup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logToTest(t)
	schema := testdb.NewSchemaName()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = testdb.PoolMaxConns
	cfg.ConnConfig.RuntimeParams["search_path"] = schema // the users table goes there too
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema (is PostgreSQL running at %s?): %v", testdb.PostgresURL(), err)
	}
	testdb.DropSchemaAtEnd(t, pool, schema)

	a, err := start(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.jobs.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	done, end := a.jobs.Subscribe(spool.EventJobCompleted)
	defer end()
	srv := httptest.NewServer(a)
	defer srv.Close()

	signup := func(form url.Values, want int) {
		t.Helper()
		resp, err := http.PostForm(srv.URL+"/signup", form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("signup %v: status %d (%s), want %d", form, resp.StatusCode, strings.TrimSpace(string(body)), want)
		}
	}
	ran := func(to string) {
		t.Helper()
		select {
		case e := <-done:
			job, err := a.jobs.JobGet(ctx, e.JobID)
			if err != nil {
				t.Fatal(err)
			}
			var userID int64
			if err := pool.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, to).Scan(&userID); err != nil {
				t.Fatalf("user %s: %v", to, err)
			}
			var args WelcomeEmail
			if err := json.Unmarshal(job.Args, &args); err != nil {
				t.Fatal(err)
			}
			if want := (WelcomeEmail{UserID: userID, To: to}); args != want {
				t.Errorf("job %d ran with args %+v, want %+v", job.ID, args, want)
			}
		case <-ctx.Done():
			t.Fatalf("the welcome email to %s did not run: %v", to, ctx.Err())
		}
	}

	signup(url.Values{"email": {"ada@example.com"}}, http.StatusCreated)
	ran("ada@example.com")
	signup(url.Values{"email": {"ada@example.com"}}, http.StatusConflict)
	signup(url.Values{"email": {"bob@example.com"}, "referrer": {"nobody@example.com"}}, http.StatusUnprocessableEntity)
	signup(url.Values{"email": {"cy@example.com"}, "referrer": {"ada@example.com"}}, http.StatusCreated)
	ran("cy@example.com")

	rows, err := pool.Query(ctx, `SELECT email || ' ' || credits FROM users ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(users, ", "); got != "ada@example.com 1, cy@example.com 0" {
		t.Errorf("users (email credits): %s, want ada@example.com 1, cy@example.com 0", got)
	}
	jobs, err := a.jobs.JobList(ctx, &spool.JobListParams{Kind: WelcomeEmail{}.Kind()})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Errorf("%d welcome email jobs stored, want 2 (ada's and cy's; the failed signups' rolled back)", len(jobs))
	}
}

// TestRunCommand runs the program as its README says, with
// SPOOL_DATABASE_URL naming a fresh database: a signup's email is sent
// (logged) and an interrupt stops the program cleanly.
func TestRunCommand(t *testing.T) {
	// The build comes before the run's deadline, bounded by go test's
	// -timeout alone, as readme_test.go's builds are: it is not what the
	// test checks, and from an empty build cache on a loaded machine it
	// alone outlasted the two minutes ("go build: signal: killed" after
	// 130 s; docs/benchmarks/2026-12-01g.md, "CI on an empty build cache").
	bin := filepath.Join(t.TempDir(), "httpserver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := newDatabase(ctx, t)
	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SPOOL_DATABASE_URL="+dsn)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(stdout)
	if !out.Scan() {
		t.Fatalf("the program printed nothing: %v", out.Err())
	}
	base, ok := strings.CutPrefix(out.Text(), "listening on ")
	if !ok {
		t.Fatalf("first line %q, want listening on URL", out.Text())
	}
	resp, err := http.PostForm(base+"/signup", url.Values{"email": {"ada@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("signup: status %d, want 201", resp.StatusCode)
	}
	logs := bufio.NewScanner(stderr)
	for {
		if !logs.Scan() {
			t.Fatalf("the program's log ended before the email was sent: %v", logs.Err())
		}
		t.Log(logs.Text())
		if strings.Contains(logs.Text(), "sending welcome email to=ada@example.com user=1") {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program did not exit cleanly on an interrupt: %v", err)
	}
}

// newDatabase creates a database dropped when the test ends, and returns
// its URL.
func newDatabase(ctx context.Context, t *testing.T) string {
	t.Helper()
	admin, err := pgx.Connect(ctx, testdb.PostgresURL())
	if err != nil {
		t.Fatalf("connect to PostgreSQL (%s): %v", testdb.PostgresURL(), err)
	}
	name := "spool_httpserver_" + strings.TrimPrefix(testdb.NewSchemaName(), "spool_test_")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close(context.Background())
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// logToTest sends the program's logs (slog's default logger, which the
// worker and the client use) to the test's log for the test's duration.
func logToTest(t *testing.T) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
}

// testWriter writes to a test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
