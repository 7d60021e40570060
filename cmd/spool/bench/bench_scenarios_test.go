package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/cmd/spool/bench/benchtest"
	"github.com/spoolq/spool/cmd/spool/cli/clitest"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// benchJSON runs a bench scenario with --json (and the test server) and
// decodes its output into out.
func benchJSON(t *testing.T, out any, args ...string) clitest.Result {
	t.Helper()
	args = append(append([]string{"bench"}, args...), "--json", "--database-url", testdb.PostgresURL())
	r := mustSpool(t, args...)
	if err := json.Unmarshal([]byte(r.Stdout), out); err != nil {
		t.Fatalf("spool %s --json must print only a JSON object: %v\n%s", strings.Join(args, " "), err, r.Stdout)
	}
	return r
}

// checkOrdered fails the test unless the latency percentiles rise.
func checkOrdered(t *testing.T, what string, s LatencyStats) {
	t.Helper()
	if !(s.P50 <= s.P95 && s.P95 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) || s.P50 < 0 {
		t.Errorf("%s percentiles out of order: %+v", what, s)
	}
}

// Shared with the lab's tests (benchtest).
var (
	checkStoresDropped = benchtest.CheckStoresDropped
	checkPlot          = benchtest.CheckPlot
)

func TestBenchInsert(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "insert.svg")
	var res insertResult
	benchJSON(t, &res, "insert", "--jobs", "600", "--single-jobs", "40", "--batch-sizes", "100,600",
		"--rounds", "2", "--plot", plotFile)
	if len(res.Cells) != 5 {
		t.Fatalf("want 5 cells (many ×2, fast ×2, single), got %+v", res.Cells)
	}
	wantCalls := map[int]int{100: 6, 600: 1, 1: 40}
	for _, c := range res.Cells {
		if c.JobsPerS <= 0 || len(c.Runs) != 2 {
			t.Errorf("%s × %d: jobs/s %v over runs %v", c.Method, c.Batch, c.JobsPerS, c.Runs)
		}
		if c.Call.Count != 2*wantCalls[c.Batch] {
			t.Errorf("%s × %d: %d calls timed, want %d", c.Method, c.Batch, c.Call.Count, 2*wantCalls[c.Batch])
		}
		checkOrdered(t, c.Method, c.Call)
	}
	if res.Cells[4].Method != "Insert" || res.Cells[4].Jobs != 40 {
		t.Errorf("last cell: %+v, want Insert of 40 jobs", res.Cells[4])
	}
	if len(res.Stores) != 10 {
		t.Errorf("want a store per cell and round (10), got %d", len(res.Stores))
	}
	checkStoresDropped(t, res.Stores...)
	checkPlot(t, plotFile)
}

func TestBenchWakeups(t *testing.T) {
	var res wakeupsResult
	benchJSON(t, &res, "wakeups", "--clients", "4", "--duration", "200ms", "--rounds", "2")
	if len(res.Modes) != 3 {
		t.Fatalf("want 3 modes, got %+v", res.Modes)
	}
	for _, m := range res.Modes {
		if m.JobsPerS <= 0 || len(m.Runs) != 2 || m.Ratio <= 0 {
			t.Errorf("mode %s: %v jobs/s over runs %v, ratio %v", m.Mode, m.JobsPerS, m.Runs, m.Ratio)
		}
	}
	if res.Inserted == 0 || res.Woken == 0 {
		t.Errorf("inserted %d, wake-ups heard %d: want both", res.Inserted, res.Woken)
	}
	checkStoresDropped(t, res.Store)
}

func TestBenchSQLEnqueue(t *testing.T) {
	var res sqlEnqueueResult
	benchJSON(t, &res, "sqlenqueue", "--clients", "2", "--duration", "200ms", "--rounds", "2", "--pickup-rate", "200", "--pickup-duration", "500ms")
	if len(res.EnqueueRuns) != 2 || len(res.InsertRuns) != 2 || len(res.Ratios) != 2 || res.Ratio <= 0 {
		t.Fatalf("want 2 paired rounds and a ratio, got %+v", res)
	}
	if res.Counted == 0 || res.WakeUps == 0 {
		t.Errorf("inserts counted %d, wake-ups heard %d: want both", res.Counted, res.WakeUps)
	}
	if len(res.EnqueueAllCPUUS) != 2 || len(res.InsertAllCPUUS) != 2 || len(res.EnqueueClientCPUUS) != 2 || len(res.InsertClientCPUUS) != 2 {
		t.Errorf("want the server's and the bench's CPU of both rounds, got %v %v %v %v",
			res.EnqueueAllCPUUS, res.InsertAllCPUUS, res.EnqueueClientCPUUS, res.InsertClientCPUUS)
	}
	if res.PickupJobs != 100 || res.Pickup.Count != 100 {
		t.Errorf("pickup: %d jobs, %d latencies, want 100 of each", res.PickupJobs, res.Pickup.Count)
	}
	checkStoresDropped(t, res.Store)
}

func TestBenchSteady(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "steady.png")
	var res steadyResult
	benchJSON(t, &res, "steady", "--rate", "300", "--duration", "1s", "--plot", plotFile)
	if res.Scheduled != 300 || res.Jobs < 1 || res.Jobs > res.Scheduled {
		t.Errorf("scheduled %d, inserted %d: want 300 scheduled and some inserted", res.Scheduled, res.Jobs)
	}
	if res.Started != res.Jobs || res.Duplicates != 0 {
		t.Errorf("inserted %d, started %d, duplicates %d: every job must start once", res.Jobs, res.Started, res.Duplicates)
	}
	if res.Pickup.Count != int(res.Jobs) || res.InsertCall.Count != int(res.Jobs) {
		t.Errorf("pickup latencies %d, insert calls %d, want %d each", res.Pickup.Count, res.InsertCall.Count, res.Jobs)
	}
	checkOrdered(t, "pickup", res.Pickup)
	checkOrdered(t, "insert call", res.InsertCall)
	// Every job's claim time comes back with it (attempted_at).
	if sp := res.PickupSplit; sp.Jobs != int(res.Jobs) || sp.AfterP50 <= 0 {
		t.Errorf("pickup split %+v: want every one of %d jobs, the part after the claim's start above 0", sp, res.Jobs)
	}
	if res.ClientCPUPerJobUS <= 0 || res.ServerCPUPerJobUS <= 0 {
		t.Errorf("client %.1f µs, server %.1f µs a job; want both measured", res.ClientCPUPerJobUS, res.ServerCPUPerJobUS)
	}
	if res.SessionCPUPerJobUS <= 0 || res.SessionCPUPerJobUS > res.ServerCPUPerJobUS {
		t.Errorf("the run's own sessions %.1f µs a job of the server's %.1f: want it measured, and a part of the whole",
			res.SessionCPUPerJobUS, res.ServerCPUPerJobUS)
	}
	n := 0
	for _, w := range res.PickupOverTime {
		n += w.Count
		if w.P50 > w.P99 || w.P99 > w.Max {
			t.Errorf("window %+v out of order", w)
		}
	}
	if n != int(res.Jobs) {
		t.Errorf("windows hold %d jobs, want %d", n, res.Jobs)
	}
	if res.AchievedRate <= 0 || res.TargetRate != 300 || res.Backend != "postgres" {
		t.Errorf("rates and settings: %+v", res)
	}
	checkStoresDropped(t, res.Store)
	checkPlot(t, plotFile)
}

func TestBenchBloat(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "bloat.svg")
	var res bloatResult
	benchJSON(t, &res, "bloat", "--rate", "200", "--hold", "1s", "--baseline", "1s", "--sample", "200ms", "--plot", plotFile)
	if len(res.Phases) != 3 || res.Phases[0].Name != "baseline" || res.Phases[1].Name != "held" {
		t.Fatalf("phases: %+v", res.Phases)
	}
	if !strings.Contains(res.Hold, "REPEATABLE READ") {
		t.Errorf("hold %q should say what held the snapshot", res.Hold)
	}
	pickups, inserts, claims := 0, 0, 0
	for i, p := range res.Phases {
		if i > 0 && p.FromS != res.Phases[i-1].ToS {
			t.Errorf("phase %s starts at %v, the one before ends at %v", p.Name, p.FromS, res.Phases[i-1].ToS)
		}
		if p.Claim.Count != p.Claims || p.JobsClaimed < 0 {
			t.Errorf("phase %s: %d claims, %d timed", p.Name, p.Claims, p.Claim.Count)
		}
		checkOrdered(t, p.Name+" claim", p.Claim)
		pickups += p.Pickup.Count
		inserts += p.Inserts
		claims += p.Claims
	}
	// A table sample is taken as the run starts and as the snapshot is
	// released: both phases have one.
	for _, p := range res.Phases[:2] {
		if p.DeadTuplesMax == nil || p.HorizonAgeMax == nil {
			t.Errorf("phase %s: no table sample (dead tuples %v, horizon %v)", p.Name, p.DeadTuplesMax, p.HorizonAgeMax)
		}
	}
	if claims == 0 {
		t.Error("no claim was timed")
	}
	if pickups != int(res.Jobs) || inserts != int(res.Jobs) || res.Started != res.Jobs || res.Duplicates != 0 {
		t.Errorf("jobs %d, started %d, pickups %d, inserts %d, duplicates %d", res.Jobs, res.Started, pickups, inserts, res.Duplicates)
	}
	if len(res.Table) < 3 {
		t.Fatalf("want table samples throughout, got %d", len(res.Table))
	}
	held := false
	for _, s := range res.Table {
		if s.At >= res.Phases[1].FromS && s.At <= res.Phases[1].ToS && s.HorizonAge > 0 && s.TableBytes > 0 {
			held = true
		}
	}
	if !held {
		t.Errorf("no sample during the held phase shows a horizon: %+v", res.Table)
	}
	checkStoresDropped(t, res.Store)
	checkPlot(t, plotFile)
}

func TestBenchScale(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "scale.png")
	var res scaleResult
	benchJSON(t, &res, "scale", "--backlogs", "1e3,3000", "--jobs", "500", "--plot", plotFile)
	if len(res.Backlogs) != 2 || res.Backlogs[0].Backlog != 1000 || res.Backlogs[1].Backlog != 3000 {
		t.Fatalf("backlogs: %+v", res.Backlogs)
	}
	if res.Backlogs[0].Ratio != 1 {
		t.Errorf("the first backlog's ratio is %v, want 1", res.Backlogs[0].Ratio)
	}
	for _, b := range res.Backlogs {
		if b.JobsPerS <= 0 || b.BacklogInsert <= 0 || b.SettleS <= 0 || len(b.Runs) != 1 {
			t.Errorf("backlog %d: %+v", b.Backlog, b)
		}
		if got := b.JobsPerS / res.Backlogs[0].JobsPerS; got != b.Ratio {
			t.Errorf("backlog %d: ratio %v, want %v", b.Backlog, b.Ratio, got)
		}
	}
	if !res.Settled || res.Jobs != 500 {
		t.Errorf("settings: %+v", res)
	}
	checkStoresDropped(t, res.Stores...)
	checkPlot(t, plotFile)
}

func TestBenchDrainPlot(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "drain.png")
	mustSpool(t, "bench", "drain", "--jobs", "500", "--quiet", "--plot", plotFile, "--database-url", testdb.PostgresURL())
	checkPlot(t, plotFile)
}

// TestBenchDrainCPU: bench drain reports the CPU time per job of the
// client and, for a server on this machine, of the server and of the run's
// own sessions on PostgreSQL; none of the server for SQLite, which runs in
// the client.
func TestBenchDrainCPU(t *testing.T) {
	var res struct {
		Client  float64 `json:"client_cpu_per_job_us"`
		Server  float64 `json:"server_cpu_per_job_us"`
		Session float64 `json:"session_cpu_per_job_us"`
	}
	r := mustSpool(t, "bench", "drain", "--jobs", "2000", "--json", "--database-url", testdb.PostgresURL())
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if res.Client <= 0 || res.Server <= 0 {
		t.Errorf("PostgreSQL drain: client %.1f µs, server %.1f µs a job; want both measured", res.Client, res.Server)
	}
	if res.Session <= 0 || res.Session > res.Server {
		t.Errorf("PostgreSQL drain: the run's own sessions %.1f µs a job of the server's %.1f; want it measured, and a part of the whole", res.Session, res.Server)
	}
	res.Client, res.Server, res.Session = 0, 0, 0
	r = mustSpool(t, "bench", "drain", "--jobs", "2000", "--json", "--database-url", "sqlite://"+filepath.Join(t.TempDir(), "cpu.db"))
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if res.Client <= 0 || res.Server != 0 || res.Session != 0 {
		t.Errorf("SQLite drain: client %.1f µs, server %.1f µs, sessions %.1f µs a job; want the client's only", res.Client, res.Server, res.Session)
	}
}

// TestBenchDrainMany: bench drain --many works its jobs with a
// many-worker (and checks, as every drain does, that the store holds them
// all completed), and reports its settings.
func TestBenchDrainMany(t *testing.T) {
	var res struct {
		Jobs         int    `json:"jobs"`
		Many         int    `json:"many"`
		ManyWait     string `json:"many_wait"`
		Request      string `json:"request"`
		RequestConns int    `json:"request_conns"`
	}
	r := mustSpool(t, "bench", "drain", "--jobs", "3000", "--many", "50", "--many-wait", "5ms", "--request", "100us",
		"--json", "--database-url", "sqlite://"+filepath.Join(t.TempDir(), "many.db"))
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if res.Jobs != 3000 || res.Many != 50 || res.ManyWait != "5ms" || res.Request != "100µs" || res.RequestConns != 4 {
		t.Fatalf("bench drain --many: %+v", res)
	}
}

// TestBenchBadInput checks that bad flags fail at once with a usage error
// and leave no file behind.
func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	url := testdb.PostgresURL()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"steady", "--rate", "0"}, "--rate"},
		{[]string{"steady", "--plot", filepath.Join(dir, "x.gif")}, ".png or .svg"},
		{[]string{"steady", "--plot", filepath.Join(dir, "nodir", "x.png")}, "does not exist"},
		{[]string{"bloat", "--hold", "0s"}, "--hold"},
		{[]string{"scale", "--backlogs", "1e4,abc"}, "--backlogs"},
		{[]string{"scale", "--backlogs", "0"}, "--backlogs"},
		{[]string{"insert", "--methods", "many,bulk"}, `"bulk"`},
		{[]string{"insert", "--batch-sizes", "1.5"}, "--batch-sizes"},
		{[]string{"drain", "--jobs", "10", "--plot", filepath.Join(dir, "x.jpg")}, ".png or .svg"},
		{[]string{"drain", "--jobs", "10", "--many", "-1"}, "--many"},
		{[]string{"drain", "--jobs", "10", "--many", "5", "--many-wait", "-1s"}, "--many-wait"},
		{[]string{"drain", "--jobs", "10", "--request", "1ms", "--request-conns", "0"}, "--request-conns"},
	} {
		r := runSpool(t, append(append([]string{"bench"}, tc.args...), "--database-url", url)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.msg) {
			t.Errorf("bench %v: want exit 2 naming %s, got %d %q", tc.args, tc.msg, r.Code, r.Stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad runs left %d files", len(entries))
	}
}

// TestBenchOnMySQL runs steady and bloat on MariaDB/MySQL: the scenarios
// work on any backend with a scratch store, and bloat's snapshot and
// sampling have a MySQL equivalent (purge held back, history list length).
func TestBenchOnMySQL(t *testing.T) {
	admin := testdb.MySQLAdmin(t)
	dbExists := func(name string) bool {
		t.Helper()
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE schema_name = ?`, name).Scan(&n); err != nil {
			t.Fatalf("look up database %s: %v", name, err)
		}
		return n > 0
	}
	run := func(out any, args ...string) {
		t.Helper()
		r := mustSpool(t, append(append([]string{"bench"}, args...), "--json", "--database-url", testdb.MySQLURL())...)
		if err := json.Unmarshal([]byte(r.Stdout), out); err != nil {
			t.Fatalf("bench %v --json: %v\n%s", args, err, r.Stdout)
		}
	}

	var st steadyResult
	run(&st, "steady", "--rate", "100", "--duration", "1s")
	if st.Backend != "mysql" || st.Jobs < 1 || st.Started != st.Jobs || st.Duplicates != 0 || st.Pickup.Count != int(st.Jobs) {
		t.Errorf("steady on mysql: %+v", st)
	}
	checkOrdered(t, "pickup", st.Pickup)
	if st.PickupSplit.Jobs != int(st.Jobs) {
		t.Errorf("steady on mysql: pickup split of %d jobs, want %d", st.PickupSplit.Jobs, st.Jobs)
	}

	var bl bloatResult
	run(&bl, "bloat", "--rate", "100", "--hold", "1s", "--baseline", "1s", "--sample", "200ms")
	if !strings.Contains(bl.Hold, "CONSISTENT SNAPSHOT") || !strings.Contains(bl.DeadMeasure, "history list") {
		t.Errorf("bloat on mysql: hold %q, dead measure %q", bl.Hold, bl.DeadMeasure)
	}
	if len(bl.Phases) != 3 || bl.Phases[1].DeadTuplesMax == nil || bl.Phases[1].HorizonAgeMax != nil {
		t.Errorf("bloat on mysql: phases %+v (want a history length sample, no horizon age)", bl.Phases)
	}
	if n := bl.Phases[0].Claims + bl.Phases[1].Claims + bl.Phases[2].Claims; n == 0 {
		t.Error("bloat on mysql: no claim was timed")
	}
	if bl.Started != bl.Jobs || len(bl.Table) < 3 {
		t.Errorf("bloat on mysql: %d of %d jobs started, %d samples", bl.Started, bl.Jobs, len(bl.Table))
	}
	for _, name := range []string{st.Store, bl.Store} {
		if !strings.HasPrefix(name, "spool_bench_") || dbExists(name) {
			t.Errorf("scratch database %q was not dropped", name)
		}
	}
}

// TestBenchBloatOnSQLite: on SQLite the held snapshot is a read transaction
// on another connection, and what grows is the write-ahead log, which
// checkpoints cannot start over while that reader needs it.
func TestBenchBloatOnSQLite(t *testing.T) {
	dir := t.TempDir()
	r := mustSpool(t, "bench", "bloat", "--rate", "300", "--hold", "2s", "--baseline", "1s", "--sample", "200ms", "--json",
		"--database-url", "sqlite://"+filepath.Join(dir, "b.db")+"?spool_synchronous=normal")
	var bl bloatResult
	if err := json.Unmarshal([]byte(r.Stdout), &bl); err != nil {
		t.Fatalf("bench bloat --json: %v\n%s", err, r.Stdout)
	}
	if !strings.Contains(bl.Hold, "read transaction") || !strings.Contains(bl.DeadMeasure, "write-ahead log") {
		t.Errorf("hold %q, dead measure %q", bl.Hold, bl.DeadMeasure)
	}
	if len(bl.Phases) != 3 || bl.Phases[0].DeadTuplesMax == nil || bl.Phases[1].DeadTuplesMax == nil || bl.Phases[1].HorizonAgeMax != nil {
		t.Fatalf("phases %+v (want WAL samples, no horizon age)", bl.Phases)
	}
	// Checkpoints keep the log near its 1,000-page threshold until the
	// reader holds it; then every commit adds to it.
	base, held := *bl.Phases[0].DeadTuplesMax, *bl.Phases[1].DeadTuplesMax
	t.Logf("WAL pages: %d unblocked, %d held", base, held)
	if held <= base || held < 1500 {
		t.Errorf("WAL pages: %d unblocked, %d held: want the held reader to let it grow", base, held)
	}
	if bl.Started != bl.Jobs || bl.Duplicates != 0 || bl.Phases[1].Claims == 0 {
		t.Errorf("%d of %d jobs started, %d duplicates, %d claims held", bl.Started, bl.Jobs, bl.Duplicates, bl.Phases[1].Claims)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the run left %d files in its directory", len(entries))
	}
}

// TestBenchPrune: bench prune seeds and prunes every finished job, times
// both drains with their claims, and drops its store.
func TestBenchPrune(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "prune.svg")
	var res pruneResult
	benchJSON(t, &res, "prune", "--finished", "3000", "--jobs", "500", "--prune-batch", "700", "--plot", plotFile)
	if res.Pruned != 3000 || res.PruneRowsPerS <= 0 || len(res.Phases) != 2 {
		t.Fatalf("result %+v: want 3000 pruned and two drains", res)
	}
	for _, p := range res.Phases {
		if p.Jobs != 500 || p.JobsPerS <= 0 || p.Claim.Count == 0 {
			t.Errorf("phase %+v: want 500 jobs drained with claims timed", p)
		}
		checkOrdered(t, p.Name, p.Claim)
	}
	checkStoresDropped(t, res.Store)
	checkPlot(t, plotFile)
}

// TestBenchLimits: bench limits runs every phase to the end, no phase's
// limit is exceeded, and a binding limit shows in what the handlers saw.
func TestBenchLimits(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "limits.svg")
	var res limitsResult
	benchJSON(t, &res, "limits", "--jobs", "600", "--rounds", "1", "--clients", "2", "--workers", "8", "--prefetch", "4",
		"--global-limit", "3", "--keys", "3", "--key-limit", "1", "--rate", "200", "--rate-per", "200ms", "--rate-jobs", "120", "--plot", plotFile)
	if len(res.Phases) != 6 {
		t.Fatalf("%d phases, want 6", len(res.Phases))
	}
	for _, p := range res.Phases {
		if p.Exceeded || p.JobsPerS <= 0 {
			t.Errorf("phase %+v: exceeded, or nothing drained", p)
		}
	}
	byName := map[string]limitsPhase{}
	for _, p := range res.Phases {
		byName[p.Name] = p
	}
	if p := byName["global"]; p.MaxConcurrentObserved != 3 {
		t.Errorf("global limit 3: the handlers saw at most %d at once", p.MaxConcurrentObserved)
	}
	if p := byName["per key"]; p.MaxPerKeyObserved != 1 {
		t.Errorf("per-key limit 1: the handlers saw %d of a key at once", p.MaxPerKeyObserved)
	}
	if p := byName["rate"]; p.MaxStartsPerWindow == 0 || p.MaxStartsPerWindow > 200 {
		t.Errorf("rate 200 per 200ms: %d starts in a window", p.MaxStartsPerWindow)
	}
	checkStoresDropped(t, res.Store)
	checkPlot(t, plotFile)
}

// TestBenchFairness: bench fairness measures each weighting's shares while
// both groups had work, close to the weights.
func TestBenchFairness(t *testing.T) {
	plotFile := filepath.Join(t.TempDir(), "fairness.svg")
	var res fairResult
	benchJSON(t, &res, "fairness", "--big", "3000", "--small", "200", "--weights", "1:1,3:1", "--workers", "4", "--plot", plotFile)
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	for _, run := range res.Runs {
		for _, g := range run.Groups {
			if d := g.Share - g.ExpectedShare; d > 0.05 || d < -0.05 {
				t.Errorf("weights %s, group %s: share %.3f, want %.3f", run.Weights, g.Key, g.Share, g.ExpectedShare)
			}
		}
		if small := run.Groups[1]; small.Starts != 200 || small.Pickup == nil || small.Pickup.Count != 200 {
			t.Errorf("weights %s: small group %+v, want 200 starts with their pickups", run.Weights, small)
		}
	}
	checkStoresDropped(t, res.Store)
	checkPlot(t, plotFile)
}

func TestBenchStepsParked(t *testing.T) {
	var res stepsResult
	benchJSON(t, &res, "steps", "--jobs", "50", "--rounds", "2", "--signals", "20", "--signal-rate", "200", "--parked", "40")
	if len(res.Ratios) != 2 || res.MedianRatio <= 0 || res.Resume.Count != 20 {
		t.Fatalf("want 2 paired rounds, a ratio and 20 resumptions, got %+v", res)
	}
	if res.Parked != 40 || len(res.ParkedRatios) != 2 || res.ParkedMedianRat <= 0 {
		t.Fatalf("want 40 jobs parked by their handlers and 2 paired rounds beside them, got %+v", res)
	}
	checkStoresDropped(t, res.Store)
}
