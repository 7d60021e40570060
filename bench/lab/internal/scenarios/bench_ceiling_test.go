package scenarios

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testkit/testdb"
)

func TestBenchCeiling(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "ceiling.svg")
	var res ceilingResult
	benchJSON(t, &res, "ceiling", "--jobs", "1500", "--batch", "400", "--compare-drain", "--plot", plotFile)
	var names []string
	for _, v := range res.Variants {
		names = append(names, v.Name)
		if v.JobsPerS <= 0 || len(v.Runs) != 1 || v.About == "" {
			t.Errorf("variant %+v", v)
		}
	}
	if got := strings.Join(names, ","); got != "spool-keep,spool-delete,cte-keep,cte-delete,claim-delete,lease-delete,lease-keep" {
		t.Errorf("variants %s", got)
	}
	if len(res.Drains) != 2 {
		t.Fatalf("want two drains beside the loops, got %+v", res.Drains)
	}
	for _, d := range res.Drains {
		if d.CPUPerJobUS <= 0 || len(d.CPURuns) != 1 {
			t.Errorf("%s: own CPU a job %v (runs %v), want one run's", d.Name, d.CPUPerJobUS, d.CPURuns)
		}
		for _, v := range res.Variants {
			if want := d.JobsPerS / v.JobsPerS; d.FractionOf[v.Name] != want {
				t.Errorf("%s as a fraction of %s: %v, want %v", d.Name, v.Name, d.FractionOf[v.Name], want)
			}
		}
	}
	checkStoresDropped(t, res.Stores...)
	checkPlot(t, plotFile)

	// One variant, drains with flags of their own, and the table.
	r := mustLab(t, "ceiling", "--jobs", "300", "--variants", "claim-delete", "--sessions", "3", "--quiet",
		"--compare-drain", "--drain-flags", "--prefetch 50  --workers 4", "--database-url", testdb.PostgresURL())
	for _, want := range []string{"VARIANT", "claim-delete", "3 sessions", "drain --prefetch 50 --workers 4 --delete-completed"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "spool-keep") {
		t.Errorf("--variants claim-delete ran other variants:\n%s", r.Stdout)
	}
	if r := runLab(t, "ceiling", "--drain-flags", "--prefetch 50", "--database-url", testdb.PostgresURL()); r.Code != 2 ||
		!strings.Contains(r.Stderr, "--drain-flags needs --compare-drain") {
		t.Errorf("--drain-flags without --compare-drain: exit %d, %s", r.Code, r.Stderr)
	}
}

// TestBenchCeilingBadInput checks that bad flags fail at once with a usage
// error.
func TestBenchCeilingBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"ceiling", "--variants", "nope"}, `"nope"`},
		{[]string{"ceiling", "--sessions", "0"}, "--sessions"},
	} {
		r := runLab(t, append(tc.args, "--database-url", testdb.PostgresURL())...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.msg) {
			t.Errorf("lab %v: want exit 2 naming %s, got %d %q", tc.args, tc.msg, r.Code, r.Stderr)
		}
	}
}

// TestBenchCeilingSQLite runs SQLite's loops (the minimal table and the
// minimal statements on spool_jobs) beside Spool's own statements: each
// finishes every job, and the scratch files are removed.
func TestBenchCeilingSQLite(t *testing.T) {
	dir := t.TempDir()
	r := mustLab(t, "ceiling", "--jobs", "2500", "--batch", "300", "--sessions", "2", "--json", "--quiet",
		"--database-url", "sqlite://"+filepath.Join(dir, "c.db"))
	var res ceilingResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("lab ceiling --json: %v\n%s", err, r.Stdout)
	}
	var names []string
	for _, v := range res.Variants {
		names = append(names, v.Name)
		if v.JobsPerS <= 0 || len(v.Runs) != 1 || v.About == "" {
			t.Errorf("variant %+v", v)
		}
		if runtime.GOOS == "linux" && v.CPUPerJobUS <= 0 {
			t.Errorf("variant %s: no CPU per job measured", v.Name)
		}
	}
	if got := strings.Join(names, ","); got != "spool-keep,spool-delete,min-keep,min-delete,raw-keep,raw-delete" {
		t.Errorf("variants %s", got)
	}
	if res.Backend != "sqlite" {
		t.Errorf("backend %q", res.Backend)
	}
	left, err := filepath.Glob(filepath.Join(dir, "spool_bench_*"))
	if err != nil || len(left) > 0 {
		t.Errorf("scratch files left: %v %v", left, err)
	}
}

// TestBenchCeilingMySQL runs the MySQL loops: the minimal table's, the same
// statements on spool_jobs, their statement timings, and --alter.
func TestBenchCeilingMySQL(t *testing.T) {
	url := testdb.MySQLURL()
	r := mustLab(t, "ceiling", "--jobs", "600", "--batch", "150", "--loop-batch", "200", "--quiet", "--json",
		"--variants", "spool-keep,min-keep,min-delete,min-spool-keep,min-spool-delete", "--database-url", url)
	var res ceilingResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("lab ceiling --json: %v\n%s", err, r.Stdout)
	}
	if res.Backend != "mysql" || len(res.Variants) != 5 {
		t.Fatalf("backend %s, variants %+v", res.Backend, res.Variants)
	}
	for _, v := range res.Variants {
		if v.JobsPerS <= 0 || len(v.Runs) != 1 {
			t.Errorf("variant %+v", v)
		}
		raw := strings.HasPrefix(v.Name, "min-")
		if want := map[bool]int{true: 200, false: 150}[raw]; v.Batch != want {
			t.Errorf("%s ran batches of %d, want %d", v.Name, v.Batch, want)
		}
		if raw && (v.StatementUS["1 claim select"] <= 0 || v.StatementUS["4 finish"] <= 0) {
			t.Errorf("%s has no statement timings: %v", v.Name, v.StatementUS)
		}
	}
	checkStoresDropped(t, res.Stores...)

	// --alter changes the loop's table: an index on a column the table
	// lacks fails the run, and names the clause.
	if r := runLab(t, "ceiling", "--jobs", "100", "--variants", "min-keep", "--alter", "ADD KEY k (no_such_column)",
		"--quiet", "--database-url", url); r.Code == 0 || !strings.Contains(r.Stderr, "--alter") {
		t.Errorf("--alter with a bad clause: exit %d, %s", r.Code, r.Stderr)
	}
	mustLab(t, "ceiling", "--jobs", "100", "--variants", "min-delete", "--alter", "ADD KEY k (run_at)", "--quiet",
		"--database-url", url)
	if r := runLab(t, "ceiling", "--jobs", "100", "--variants", "spool-keep", "--alter", "ADD KEY k (run_at)",
		"--database-url", url); r.Code != 2 || !strings.Contains(r.Stderr, "does not take --alter") {
		t.Errorf("--alter on a Spool variant: exit %d, %s", r.Code, r.Stderr)
	}
}

// TestBenchCeilingMySQLStatements runs the loops with Spool's statement
// parts, whole and with parts left out, and refuses an unknown part.
func TestBenchCeilingMySQLStatements(t *testing.T) {
	url := testdb.MySQLURL()
	for _, omit := range []string{"", "lease_list", "fence,finalized_at", strings.Join(mysqlStatementParts, ",")} {
		r := mustLab(t, "ceiling", "--jobs", "500", "--loop-batch", "200", "--quiet", "--json",
			"--variants", "stmt-spool-keep,stmt-spool-delete", "--loop-omit", omit, "--database-url", url)
		var res ceilingResult
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
			t.Fatalf("lab ceiling --json: %v\n%s", err, r.Stdout)
		}
		if len(res.Variants) != 2 {
			t.Fatalf("variants %+v", res.Variants)
		}
		for _, v := range res.Variants {
			if v.JobsPerS <= 0 || v.StatementUS["4 finish"] <= 0 {
				t.Errorf("--loop-omit %q: variant %+v", omit, v)
			}
		}
		checkStoresDropped(t, res.Stores...)
	}
	if r := runLab(t, "ceiling", "--jobs", "100", "--variants", "stmt-spool-keep", "--loop-omit", "nothing",
		"--database-url", url); r.Code != 2 || !strings.Contains(r.Stderr, "--loop-omit") {
		t.Errorf("--loop-omit nothing: exit %d, %s", r.Code, r.Stderr)
	}
}
