package bench

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestBenchOrdering runs the ordering scenario with both claim strategies on
// both SQL servers: every job runs once, the histogram accounts for every
// run, the statistics are consistent, the plot is written and the scratch
// store is dropped.
func TestBenchOrdering(t *testing.T) {
	admin := testdb.MySQLAdmin(t)
	for _, server := range []struct{ name, url string }{{"mysql", testdb.MySQLURL()}, {"postgres", testdb.PostgresURL()}} {
		for _, strategy := range []string{"pessimistic", "optimistic"} {
			t.Run(server.name+"/"+strategy, func(t *testing.T) {
				plotPath := filepath.Join(t.TempDir(), "reorder.svg")
				r := mustSpool(t, "bench", "ordering", "--jobs", "300", "--workers", "4", "--strategy", strategy,
					"--plot", plotPath, "--json", "--database-url", server.url)
				var res orderingResult
				if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
					t.Fatalf("--json must print only a JSON object: %v\n%s", err, r.Stdout)
				}
				if res.Backend != server.name || res.Strategy != strategy || res.Jobs != 300 || res.Clients != 4 || res.Runs != 300 || res.RanTwice != 0 {
					t.Fatalf("result: %+v", res)
				}
				var binned int64
				for _, b := range res.Histogram {
					binned += b.Count
				}
				o := res.Reorder
				if binned != res.Runs || !(o.P50 <= o.P90 && o.P90 <= o.P99 && o.P99 <= o.P999 && o.P999 <= o.Max) || o.Max >= 300 || o.Mean < 0 {
					t.Fatalf("reorder: %+v, histogram %+v", o, res.Histogram)
				}
				if res.JobsPerS <= 0 || res.Seconds <= 0 {
					t.Fatalf("rate: %+v", res)
				}
				checkPlot(t, plotPath)
				if server.name == "postgres" {
					checkStoresDropped(t, res.Store)
					return
				}
				var n int
				if err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE schema_name = ?`, res.Store).Scan(&n); err != nil || n != 0 {
					t.Fatalf("scratch database %s left behind (%v)", res.Store, err)
				}
			})
		}
	}
}

// TestBenchDrainStrategy: drain takes --strategy and reports the strategy
// the backend used.
func TestBenchDrainStrategy(t *testing.T) {
	for _, url := range []string{testdb.MySQLURL(), testdb.PostgresURL()} {
		r := mustSpool(t, "bench", "drain", "--jobs", "200", "--strategy", "optimistic", "--json", "--database-url", url)
		var res drainResult
		if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
			t.Fatal(err)
		}
		if res.Strategy != "optimistic" || res.Jobs != 200 {
			t.Fatalf("%s: %+v", url, res)
		}
	}
}

// TestBenchOrderingBadInput: bad flags are usage errors that create nothing.
func TestBenchOrderingBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--strategy", "fast", "--database-url", testdb.MySQLURL()},
		{"--strategy", "optimistic", "--database-url", "sqlite://" + filepath.Join(t.TempDir(), "x.db")},
		{"--workers", "10", "--per-client", "3", "--database-url", testdb.MySQLURL()},
		{"--jobs", "0", "--database-url", testdb.MySQLURL()},
		{"--plot", "out.gif", "--database-url", testdb.MySQLURL()},
	} {
		r := runSpool(t, append([]string{"bench", "ordering"}, args...)...)
		if r.Code != 2 || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, r.Code, r.Stdout, r.Stderr)
		}
		if strings.Contains(r.Stderr, "spool_bench_") {
			t.Errorf("%v: a scratch store was made: %s", args, r.Stderr)
		}
	}
	r := runSpool(t, "bench", "drain", "--jobs", "10", "--strategy", "fast", "--database-url", testdb.PostgresURL())
	if r.Code != 2 {
		t.Errorf("drain --strategy fast: exit %d", r.Code)
	}
}
