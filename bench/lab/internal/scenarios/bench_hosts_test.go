package scenarios

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBenchHosts runs worker processes on simulated hosts against each
// server the bench starts, and checks that every process worked from its
// own host (the server saw connections from each host's address), that
// every job was drained and every pickup job started exactly once, and
// that the hosts and bridge are gone afterwards.
func TestBenchHosts(t *testing.T) {
	t.Setenv(asCLIEnv, "1") // for the worker processes
	for _, server := range []string{"postgres", "mariadb"} {
		t.Run(server, func(t *testing.T) {
			plotPath := filepath.Join(t.TempDir(), "hosts.png")
			args := []string{"hosts", "--server", server, "--hosts", "1,3", "--jobs", "3000",
				"--rate", "300", "--pickup-duration", "1s", "--idle-duration", "1s", "--workers", "20", "--json", "--quiet", "--plot", plotPath}
			statements := filepath.Join(t.TempDir(), "statements.txt")
			args = append(args, "--statements", statements)
			// A pool's bound reaches the workers: each host's connections
			// are its pool's and the listener's, taken out of it.
			const poolMax = 3
			if server == "postgres" {
				args = append(args, "--pool-max-conns", strconv.Itoa(poolMax))
			}
			r := mustLab(t, args...)
			var res hostsResult
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
				t.Fatalf("--json must print only a JSON object: %v\n%s", err, r.Stdout)
			}
			if res.Server != server || !res.Durable || len(res.Steps) != 2 {
				t.Fatalf("result: %+v", res)
			}
			for i, want := range []int{1, 3} {
				s := res.Steps[i]
				if s.Processes != want || len(s.Connections) != want {
					t.Fatalf("step %d: %d processes, connections %v; want %d", i, s.Processes, s.Connections, want)
				}
				for host, c := range s.Connections {
					if c < 1 {
						t.Errorf("%d processes: the server saw no connection from host %d (%v)", want, host, s.Connections)
					}
					if server == "postgres" && c > poolMax+1 {
						t.Errorf("%d processes: host %d held %d connections with --pool-max-conns %d (%v)", want, host, c, poolMax, s.Connections)
					}
				}
				// The warm drain: the same processes drain as many jobs
				// again, reported apart, beside what a fault cost.
				if w := s.Warm; w == nil || w.DrainJobsPerS <= 0 || w.ServerCPUPerJobUS <= 0 || w.ServerCPUShare <= 0 || w.ClientCPUPerJobUS <= 0 || len(w.DrainRuns) != 1 {
					t.Errorf("%d processes: warm drain figures missing: %+v", want, w)
				}
				if s.FaultProbeUS <= 0 {
					t.Errorf("%d processes: fault probe %.2f µs, want a positive cost", want, s.FaultProbeUS)
				}
				if s.DrainJobsPerS <= 0 || s.ClientCPUPerJobUS <= 0 || s.ServerCPUPerJobUS <= 0 || s.ServerCPUShare <= 0 {
					t.Errorf("%d processes: drain figures missing: %+v", want, s)
				}
				// The producers stop at the end of the phase whether or not
				// they kept the schedule (a loaded machine shows as a
				// shortfall in the count): every job they inserted must
				// have started, once.
				if s.PickupJobs < 1 || s.PickupJobs > 300 || int64(s.Pickup.Count) != s.PickupJobs || s.Duplicates != 0 {
					t.Errorf("%d processes: %d pickup jobs inserted (of 300 scheduled), %d started, %d started twice; want every one inserted started once",
						want, s.PickupJobs, s.Pickup.Count, s.Duplicates)
				}
				checkOrdered(t, "pickup", s.Pickup)
				// The probe's 2,000 round trips cost the server CPU; the
				// pickup rate is the count over the phase's second.
				if s.ProbeServerUS <= 0 || s.PickupJobsPerS != float64(s.PickupJobs) {
					t.Errorf("%d processes: probe %.1f µs a statement, pickup %.1f jobs/s for %d jobs in 1 s", want, s.ProbeServerUS, s.PickupJobsPerS, s.PickupJobs)
				}
			}
			checkPlot(t, plotPath)
			{
				// One block per measured phase, each with the claims
				// (PostgreSQL's statements; MariaDB's counters).
				claims := map[string]string{"postgres": "spool_claim_epoch()", "mariadb": "Com_select"}[server]
				text, err := os.ReadFile(statements)
				if err != nil {
					t.Fatal(err)
				}
				blocks := strings.Split(strings.TrimSpace(string(text)), "\n\n")
				var heads []string
				for _, b := range blocks {
					head, _, _ := strings.Cut(b, "\n")
					heads = append(heads, head)
					if !strings.Contains(head, ", idle, ") && !strings.Contains(b, claims) {
						t.Errorf("--statements: no claim in block %q", head)
					}
				}
				for _, want := range []string{"== 1 worker processes, round 1, drain of 3000 jobs", "== 1 worker processes, round 1, pickup of",
					"== 1 worker processes, round 1, idle, ",
					"== 3 worker processes, round 1, drain of 3000 jobs", "== 3 worker processes, round 1, pickup of",
					"== 3 worker processes, round 1, idle, "} {
					if !slices.ContainsFunc(heads, func(h string) bool { return strings.HasPrefix(h, want) }) {
						t.Errorf("--statements: no block %q in %q", want, heads)
					}
				}
				if len(blocks) != 6 {
					t.Errorf("--statements: %d blocks, want 6 (the warm-up writes none): %q", len(blocks), heads)
				}
			}
			pid := strconv.Itoa(os.Getpid())
			out, err := exec.Command("ip", "netns", "list").CombinedOutput()
			if err != nil {
				t.Fatalf("ip netns list: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "spool-"+pid+"-") {
				t.Errorf("hosts left behind:\n%s", out)
			}
			if err := exec.Command("ip", "link", "show", "spbr"+pid).Run(); err == nil {
				t.Errorf("bridge spbr%s left behind", pid)
			}
		})
	}
}

// TestBenchHostsBadInput checks that bad flags are refused before anything
// is created.
func TestBenchHostsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "oracle"}, "--server must be postgres or mariadb"},
		{[]string{"--hosts", "1,x"}, `--hosts: "x" is not a whole number`},
		{[]string{"--hosts", "65"}, "--hosts: at most 64 processes"},
		{[]string{"--database-url", "postgres://x"}, "--database-url is not used"},
		{[]string{"--rate", "0"}, "--rate must be above 0"},
		{[]string{"--claim-lock", "table"}, "--claim-lock must be queue or off"},
		{[]string{"--wake-routing", "maybe"}, "--wake-routing must be looker, on or off"},
		{[]string{"--pool-max-conns", "-1"}, "--pool-max-conns must be between 0 and 1000"},
		{[]string{"--server", "mariadb", "--pool-max-conns", "4"}, "--pool-max-conns is PostgreSQL's"},
	} {
		r := runLab(t, append([]string{"hosts"}, tc.args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("bench hosts %v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}
}
