package scenarios

import (
	"encoding/json"
	"testing"
	"time"
)

// TestBenchFailover kills the primary of a pg_auto_failover formation while
// jobs are inserted and worked: no acknowledged job may be lost, no effect
// applied twice, and writes must come back.
func TestBenchFailover(t *testing.T) {
	t.Setenv(asCLIEnv, "1") // for the worker processes
	r := mustLab(t, "failover", "--failovers", "1", "--duration", "25s", "--jobs", "1500", "--json", "--quiet")
	var res failoverResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("--json must print only a JSON object: %v\n%s", err, r.Stdout)
	}
	if !res.OK || res.Failovers != 1 || res.Lost != 0 || res.DuplicateEffects != 0 {
		t.Fatalf("failovers %d, lost %d, duplicate effects %d, ok %v; violations %v",
			res.Failovers, res.Lost, res.DuplicateEffects, res.OK, res.Chaos.Violations)
	}
	// How many inserts a loaded machine acknowledges in 25 s is a rate, not
	// a property; that the load ran across the failover is: jobs
	// acknowledged, every one completed, and an insert acknowledged after
	// the kill (the outage check below).
	if res.Acknowledged == 0 || res.Chaos.Completed != res.Acknowledged {
		t.Errorf("%d acknowledged, %d completed: the load did not run", res.Acknowledged, res.Chaos.Completed)
	}
	// The fast timeouts promote the standby in about 10 s.
	if len(res.OutagesS) != 1 || res.OutageS <= 0 || res.OutageS > 60 {
		t.Errorf("write outages %v s, want one between 0 and 60", res.OutagesS)
	}
}

// TestWriteProbeOutages checks the outage arithmetic: from each fault to
// the first successful write after it, -1 when none came.
func TestWriteProbeOutages(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	w := &writeProbe{oks: []time.Time{t0, t0.Add(time.Second), t0.Add(13 * time.Second)}}
	got := w.outages([]chaosFault{{At: t0.Add(1500 * time.Millisecond)}, {At: t0.Add(20 * time.Second)}})
	if len(got) != 2 || got[0] != 11.5 || got[1] != -1 {
		t.Fatalf("outages %v, want [11.5 -1]", got)
	}
}

// TestFailoverSchedule checks that failovers are spread over the middle of
// the run, leaving its start for work to begin and its end to drain.
func TestFailoverSchedule(t *testing.T) {
	s := failoverSchedule(3, 100*time.Second)
	want := []time.Duration{10 * time.Second, 36666666666, 63333333332}
	if len(s) != 3 {
		t.Fatalf("%d failovers, want 3", len(s))
	}
	for i, f := range s {
		if f.kind != "restart_failover" || f.at != want[i] {
			t.Errorf("failover %d: %s at %s, want restart_failover at %s", i, f.kind, f.at, want[i])
		}
	}
}
