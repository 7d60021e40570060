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
