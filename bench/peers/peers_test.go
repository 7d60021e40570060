package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary serve as the runner the orchestrator
// starts ('run-one'), as the command's own binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "run-one" {
		if err := runOne(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString("peers: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testPostgresURL is the server the test uses: $SPOOL_TEST_POSTGRES_URL, or
// the local server, as the main module's tests. Its sessions, every
// system's included (pgx and node-postgres both send the options
// parameter), commit without waiting for the WAL flush: this test checks
// that each system runs and reports, which a commit's flush does not
// change, and its time then does not hang on the machine's disk (a
// fresh-clone CI run took 284 s here against 79 s locally).
func testPostgresURL() string {
	u := os.Getenv("SPOOL_TEST_POSTGRES_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "options=-c%20synchronous_commit%3Doff"
}

// TestQuickRun runs every available system through every scenario in quick
// mode, end to end on the real server, and checks the report: every run
// succeeded with the store's counts matching, each peer has a ratio to
// Spool, and no database of the run is left behind.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"--quick", "--json", "--quiet", "--database-url", testPostgresURL(), "--sqlite-dir", t.TempDir()}
	err := run(ctx, args, nil, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}

	systems := defaultSystems()
	want := 0
	cfg := &config{systems: systems}
	for _, sc := range []string{scenarioDrain, scenarioInsert, scenarioSteady} {
		want += len(cfg.entries(sc))
	}
	if len(rep.Runs) != want {
		t.Errorf("%d runs, want %d (one per system, scenario and method)", len(rep.Runs), want)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || r.Result == nil {
			t.Errorf("%s %s %s: failed: %s", r.Scenario, r.System, r.Method, r.Error)
			continue
		}
		res := r.Result
		switch r.Scenario {
		case scenarioDrain:
			if res.Jobs != 2000 || res.Completed != 2000 || res.JobsPerS <= 0 {
				t.Errorf("drain %s: jobs %d, completed %d, %.0f jobs/s; want 2000, 2000, > 0", r.System, res.Jobs, res.Completed, res.JobsPerS)
			}
		case scenarioInsert:
			if res.Stored != 2000 || res.JobsPerS <= 0 {
				t.Errorf("insert %s %s: stored %d, %.0f jobs/s; want 2000, > 0", r.System, r.Method, res.Stored, res.JobsPerS)
			}
		case scenarioSteady:
			l := res.Latency
			if l == nil || l.Samples != res.Jobs || res.Jobs == 0 || res.Completed != res.Expected {
				t.Errorf("steady %s: latency %+v for %d jobs, completed %d of %d", r.System, l, res.Jobs, res.Completed, res.Expected)
			} else if !(l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("steady %s: percentiles out of order: %+v", r.System, l)
			}
		}
		if res.Version == "" || len(res.Settings) == 0 {
			t.Errorf("%s %s: no version or settings reported", r.Scenario, r.System)
		}
	}
	ran := map[string]bool{}
	for _, s := range systems {
		ran[s.name] = true
	}
	for _, row := range rep.Summary {
		sys, err := findSystem(row.System)
		if err != nil {
			t.Fatal(err)
		}
		if !ran[sys.spool] {
			continue // Spool-SQLite is not in this build: nothing to compare with
		}
		if row.Versus == "" {
			t.Errorf("%s %s %s: no ratio to Spool", row.Scenario, row.System, row.Method)
		}
		if row.Scenario != scenarioSteady && row.Ratio <= 0 {
			t.Errorf("%s %s %s: ratio %v", row.Scenario, row.System, row.Method, row.Ratio)
		}
	}

	conn, err := pgx.Connect(ctx, testPostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left []string
	for _, r := range rep.Runs {
		if strings.HasPrefix(r.Store, dbPrefix) {
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, r.Store).Scan(&exists); err != nil {
				t.Fatal(err)
			}
			if exists {
				left = append(left, r.Store)
			}
		} else if _, err := os.Stat(r.Store); err == nil {
			left = append(left, r.Store)
		}
	}
	if len(left) > 0 {
		t.Errorf("stores left behind: %v", left)
	}
}

// TestBadOptions checks that bad flags fail with a clear error before any
// store is created.
func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--systems", "spool,sidekiq"}, `unknown system "sidekiq"`},
		{[]string{"--scenarios", "drain,scale"}, `unknown scenario "scale"`},
		{[]string{"--reps", "0"}, "must be at least 1"},
		{[]string{"--rate", "-5"}, "must be positive"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--database-url", testPostgresURL()}, tc.args...)
		err := run(context.Background(), args, nil, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: wrote %q to stdout", tc.args, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	t.Setenv("SPOOL_DATABASE_URL", "")
	err := run(context.Background(), []string{"--systems", "river"}, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "needs a PostgreSQL server") {
		t.Errorf("no URL: error %v, want one saying a server is needed", err)
	}
}

// TestStats checks the median and percentile helpers on known samples.
func TestStats(t *testing.T) {
	if s := statOf([]float64{5, 1, 3}); s != (stat{Median: 3, Min: 1, Max: 5}) {
		t.Errorf("statOf odd: %+v", s)
	}
	if s := statOf([]float64{4, 1, 3, 2}); s.Median != 2.5 {
		t.Errorf("statOf even: median %v, want 2.5", s.Median)
	}
	lat := make([]float64, 1000)
	for i := range lat {
		lat[len(lat)-1-i] = float64(i + 1) // 1..1000, reversed
	}
	got := summarize(lat)
	want := latencySummary{P50: 500, P95: 950, P99: 990, P999: 999, Max: 1000, Samples: 1000}
	if *got != want {
		t.Errorf("summarize: %+v, want %+v", *got, want)
	}
}
