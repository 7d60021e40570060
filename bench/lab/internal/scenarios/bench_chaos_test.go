package scenarios

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// cleanAudit is a run in which every invariant held: job 1 (an effect job)
// was claimed by w0, which was killed mid-run; after its lease ended w1 ran
// it again and completed it with its effect. Job 2 failed once and was
// retried. Job 3 completed on the first go.
func cleanAudit() *chaosAudit {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fin := func(ms int) *time.Time { t := at(ms); return &t }
	return &chaosAudit{
		Claims: []chaosClaim{{ID: 1, Fence: 1, Proc: "w0g0", At: at(0)}},
		Starts: []chaosStart{
			{ID: 1, Fence: 1, Attempt: 1, Proc: "w0g0", At: at(10), LeasedUntil: at(3000)},
			{ID: 1, Fence: 2, Attempt: 2, Proc: "w1g0", At: at(5000), LeasedUntil: at(8000)},
			{ID: 2, Fence: 1, Attempt: 1, Proc: "w1g0", At: at(100), LeasedUntil: at(3100)},
			{ID: 2, Fence: 2, Attempt: 2, Proc: "w2g0", At: at(400), LeasedUntil: at(3400)},
			{ID: 3, Fence: 1, Attempt: 1, Proc: "w2g0", At: at(200), LeasedUntil: at(3200)},
		},
		Ends: []chaosEnd{
			{ID: 1, Fence: 2, Proc: "w1g0", At: at(5050)},
			{ID: 2, Fence: 1, Proc: "w1g0", At: at(150)},
			{ID: 2, Fence: 2, Proc: "w2g0", At: at(450)},
			{ID: 3, Fence: 1, Proc: "w2g0", At: at(250)},
		},
		// Job 1's first lease was extended once, to 4 s, before w0 died.
		Beats: []chaosBeat{{ID: 1, Fence: 1, LiveUntil: at(4000)}},
		Jobs: []chaosJob{
			{ID: 1, Seq: 0, State: backend.StateCompleted, Fence: 2, FinalizedAt: fin(5040), Effect: true},
			{ID: 2, Seq: 1, State: backend.StateCompleted, Fence: 2, FinalizedAt: fin(460)},
			{ID: 3, Seq: 2, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(260)},
		},
		Effects: []chaosEffect{{ID: 1, Fence: 2}},
		Acked:   []int64{0, 1, 2},
		Faults:  []chaosFault{{Kind: "kill_worker", At: at(1000), Procs: []string{"w0g0"}}},
	}
}

// violationCounts returns the invariant counters of c, by name.
func violationCounts(c *chaosCheck) map[string]int64 {
	return map[string]int64{
		"lost":                            c.Lost,
		"runs_after_committed_completion": c.RunsAfterCommittedCompletion,
		"stale_completions_accepted":      c.StaleCompletionsAccepted,
		"overlapping_live_leases":         c.OverlappingLiveLeases,
		"late_starts":                     c.LateStarts,
		"duplicate_effects":               c.DuplicateEffects,
		"missing_effects":                 c.MissingEffects,
		"pending":                         c.Pending,
	}
}

// TestChaosLateStartLiveInDB: a start past the claim's lease end is not
// late when the database had extended the lease (a stall credit).
func TestChaosLateStartLiveInDB(t *testing.T) {
	a := cleanAudit()
	s := &a.Starts[4] // job 3, claimed until 3.2 s
	s.At = s.LeasedUntil.Add(time.Second)
	a.Ends[3].At = s.At.Add(50 * time.Millisecond)
	a.Jobs[2].FinalizedAt = &a.Ends[3].At
	if c := checkChaos(a); c.LateStarts != 1 {
		t.Fatalf("late starts %d, want 1 without a database lease", c.LateStarts)
	}
	s.DBLeasedUntil = s.At.Add(2 * time.Second)
	if c := checkChaos(a); c.LateStarts != 0 || c.LateByClaimLiveInDB != 1 || !c.OK() {
		t.Fatalf("late starts %d, live in db %d, violations %v", c.LateStarts, c.LateByClaimLiveInDB, c.Violations)
	}
}

func TestChaosStartGap(t *testing.T) {
	a := cleanAudit()
	// Starts at 10, 100, 200, 400 and 5000 ms: the gap before 5000 counts
	// only while the producer was still inserting.
	if c := checkChaos(a); c.LongestStartGapMS != 4600 {
		t.Errorf("gap %v ms, want 4600", c.LongestStartGapMS)
	}
	a.BusyUntil = a.Starts[3].At.Add(-time.Millisecond) // producer done at 399 ms
	if c := checkChaos(a); c.LongestStartGapMS != 200 {
		t.Errorf("gap %v ms after the producer stopped at 399 ms, want 200 (100 → 200 → 400)", c.LongestStartGapMS)
	}
}

func TestChaosCheckClean(t *testing.T) {
	c := checkChaos(cleanAudit())
	if !c.OK() {
		t.Fatalf("clean audit: violations %v\n%s", c.Violations, strings.Join(c.Examples, "\n"))
	}
	if c.Enqueued != 3 || c.Completed != 3 || c.JobsRunTwice != 2 || c.Starts != 5 {
		t.Errorf("counts: %+v", c)
	}
	// w0 held job 1 at the kill (1 s); it started again at 5 s.
	r := c.Recovery["kill_worker"]
	if r.Faults != 1 || r.Jobs != 1 || r.MaxMS != 4000 || r.FirstStartMS != 4000 {
		t.Errorf("recovery: %+v", r)
	}
}

// TestChaosRecoveryPhases: the time from a fault to the next start of a job
// it interrupted splits into fault → rescue, rescue → claim and claim →
// start; a job its process handed back (no rescue) counts only in the last.
func TestChaosRecoveryPhases(t *testing.T) {
	a := cleanAudit()
	t0 := a.Starts[0].At.Add(-10 * time.Millisecond)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Job 1: rescued at 4 s, claimed by w1 at 4.9 s, started at 5 s.
	a.Jobs[0].Rescues = []time.Time{at(4000)}
	a.Claims = append(a.Claims, chaosClaim{ID: 1, Fence: 2, Proc: "w1g0", At: at(4900)})
	r := checkChaos(a).Recovery["kill_worker"]
	want := recoveryStats{Faults: 1, Jobs: 1, P50MS: 4000, P99MS: 4000, MaxMS: 4000, FirstStartMS: 4000,
		FaultToRescue: phaseStats{Jobs: 1, P50MS: 3000, P99MS: 3000, MaxMS: 3000},
		RescueToClaim: phaseStats{Jobs: 1, P50MS: 900, P99MS: 900, MaxMS: 900},
		ClaimToStart:  phaseStats{Jobs: 1, P50MS: 100, P99MS: 100, MaxMS: 100}}
	if r != want {
		t.Fatalf("recovery:\n got %+v\nwant %+v", r, want)
	}
	// Without the rescue (its process released it), only claim → start.
	a.Jobs[0].Rescues = nil
	r = checkChaos(a).Recovery["kill_worker"]
	if r.Jobs != 1 || r.FaultToRescue.Jobs != 0 || r.RescueToClaim.Jobs != 0 || r.ClaimToStart.Jobs != 1 {
		t.Fatalf("recovery of a released job: %+v", r)
	}
}

// TestChaosRecoveryHeldByLatestClaim: a job is held by its latest claim. A
// claim its process handed back unstarted, followed by a claim whose run
// returned (a failure) before the fault, is no job the fault interrupted,
// however late the retry then starts.
func TestChaosRecoveryHeldByLatestClaim(t *testing.T) {
	a := cleanAudit()
	t0 := a.Starts[0].At.Add(-10 * time.Millisecond)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a.Claims = append(a.Claims,
		chaosClaim{ID: 3, Fence: 1, Proc: "w0g0", At: at(100)}, // handed back unstarted
		chaosClaim{ID: 3, Fence: 2, Proc: "w0g0", At: at(500)},
		chaosClaim{ID: 3, Fence: 3, Proc: "w1g0", At: at(8990)})
	a.Starts[4] = chaosStart{ID: 3, Fence: 2, Attempt: 1, Proc: "w0g0", At: at(510), LeasedUntil: at(3500)}
	a.Ends[3] = chaosEnd{ID: 3, Fence: 2, Proc: "w0g0", At: at(600)}
	a.Starts = append(a.Starts, chaosStart{ID: 3, Fence: 3, Attempt: 2, Proc: "w1g0", At: at(9000), LeasedUntil: at(12000)})
	a.Ends = append(a.Ends, chaosEnd{ID: 3, Fence: 3, Proc: "w1g0", At: at(9050)})
	fin := at(9060)
	a.Jobs[2].Fence, a.Jobs[2].FinalizedAt = 3, &fin
	c := checkChaos(a)
	if !c.OK() {
		t.Fatalf("violations %v: %v", c.Violations, c.Examples)
	}
	if r := c.Recovery["kill_worker"]; r.Jobs != 1 || r.MaxMS != 4000 {
		t.Fatalf("recovery %+v: want only job 1, 4 s", r)
	}
}

// TestChaosCheckDetects breaks each invariant in turn, on the clean audit,
// and checks that exactly that one is reported.
func TestChaosCheckDetects(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name    string
		want    map[string]int64
		breakIt func(a *chaosAudit)
	}{
		{"lost: acknowledged job without a row", map[string]int64{"lost": 1}, func(a *chaosAudit) {
			a.Acked = append(a.Acked, 3)
		}},
		{"lost: cancelled", map[string]int64{"lost": 1}, func(a *chaosAudit) {
			a.Jobs[2].State = backend.StateCancelled
		}},
		{"pending after the drain", map[string]int64{"pending": 1}, func(a *chaosAudit) {
			a.Jobs[2].State, a.Jobs[2].FinalizedAt = backend.StateRetryable, nil
		}},
		{"run after committed completion", map[string]int64{"runs_after_committed_completion": 1}, func(a *chaosAudit) {
			// Job 3 completed at 260 ms; fence 2 starts at 300 ms, its
			// lease live while fence 1's run had already returned.
			a.Starts = append(a.Starts, chaosStart{ID: 3, Fence: 2, Attempt: 2, Proc: "w0g1", At: at(300), LeasedUntil: at(3300)})
			a.Ends = append(a.Ends, chaosEnd{ID: 3, Fence: 2, Proc: "w0g1", At: at(320)})
		}},
		{"stale completion: effect under an old fence", map[string]int64{"stale_completions_accepted": 1}, func(a *chaosAudit) {
			a.Effects[0].Fence = 1
		}},
		{"stale completion: effect of a job not completed", map[string]int64{"stale_completions_accepted": 1}, func(a *chaosAudit) {
			a.Effects = append(a.Effects, chaosEffect{ID: 3, Fence: 1})
			a.Jobs[2].State = backend.StateDiscarded
		}},
		{"duplicate effect", map[string]int64{"duplicate_effects": 1}, func(a *chaosAudit) {
			a.Effects = append(a.Effects, chaosEffect{ID: 1, Fence: 2})
		}},
		{"missing effect", map[string]int64{"missing_effects": 1}, func(a *chaosAudit) {
			a.Effects = nil
		}},
		{"late start", map[string]int64{"late_starts": 1}, func(a *chaosAudit) {
			// Job 3's claim ran out at 3.2 s; its handler started at 3.2 s.
			a.Starts[4].At, a.Starts[4].LeasedUntil = at(3200), at(3200)
			a.Ends[3].At = at(3250)
			a.Jobs[2].FinalizedAt = &a.Ends[3].At
		}},
		{"overlap: new claim inside the claimed lease", map[string]int64{"overlapping_live_leases": 1}, func(a *chaosAudit) {
			// w1 starts job 1 at 2.5 s, while w0's lease (to 3 s) holds.
			a.Starts[1].At = at(2500)
			a.Ends[0].At = at(2550)
			a.Jobs[0].FinalizedAt = &a.Ends[0].At
		}},
		{"overlap: new claim inside a heartbeated lease", map[string]int64{"overlapping_live_leases": 1}, func(a *chaosAudit) {
			// The heartbeat held job 1 to 4 s; w1 starts it at 3.5 s.
			a.Starts[1].At = at(3500)
			a.Ends[0].At = at(3550)
			a.Jobs[0].FinalizedAt = &a.Ends[0].At
		}},
		{"overlap: one claim started twice", map[string]int64{"overlapping_live_leases": 1}, func(a *chaosAudit) {
			a.Starts = append(a.Starts, chaosStart{ID: 3, Fence: 1, Attempt: 1, Proc: "w3g0", At: at(210), LeasedUntil: at(3200)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := cleanAudit()
			tc.breakIt(a)
			c := checkChaos(a)
			got := violationCounts(c)
			for name, n := range got {
				if n != tc.want[name] {
					t.Errorf("%s = %d, want %d", name, n, tc.want[name])
				}
			}
			if c.OK() || len(c.Violations) != 1 {
				t.Errorf("violations %v, want exactly one", c.Violations)
			}
			t.Logf("examples: %v", c.Examples)
		})
	}
}

// TestChaosCheckNoFalseOverlap: a run that outlives its lease (the process
// was stopped) is not live after the lease, so a rescue's new claim after
// it does not overlap; nor does a late start's claim of an expired lease.
func TestChaosCheckNoFalseOverlap(t *testing.T) {
	a := cleanAudit()
	// w0's run of job 1 returned only at 6 s (SIGSTOP), after w1 started it
	// at 5 s: its lease, last extended to 4 s, had ended.
	a.Ends = append(a.Ends, chaosEnd{ID: 1, Fence: 1, Proc: "w0g0", At: a.Starts[0].At.Add(6 * time.Second)})
	if c := checkChaos(a); !c.OK() {
		t.Fatalf("violations %v: %v", c.Violations, c.Examples)
	}
}

func TestChaosAuditRoundTrip(t *testing.T) {
	want := cleanAudit()
	var b strings.Builder
	for _, s := range want.Starts {
		b.WriteString(formatStart(s))
	}
	for _, e := range want.Ends {
		b.WriteString(formatEnd(e))
	}
	b.WriteString(formatBeat(want.Beats[0].LiveUntil, []backend.LeaseRef{{ID: 1, Fence: 1}}))
	b.WriteString(formatClaim(want.Claims[0].At, "w0g0", []*backend.JobRow{{ID: 1, Fence: 1}}))
	b.WriteString("S 1 2\n") // torn or foreign: counted, not fatal
	var got chaosAudit
	if err := readAudit(strings.NewReader(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Starts) != len(want.Starts) || len(got.Ends) != len(want.Ends) || len(got.Beats) != 1 || len(got.Claims) != 1 || got.Malformed != 1 {
		t.Fatalf("parsed %d starts, %d ends, %d beats, %d claims, %d malformed", len(got.Starts), len(got.Ends), len(got.Beats), len(got.Claims), got.Malformed)
	}
	for i, s := range got.Starts {
		w := want.Starts[i]
		if s.ID != w.ID || s.Fence != w.Fence || s.Attempt != w.Attempt || s.Proc != w.Proc || !s.At.Equal(w.At) || !s.LeasedUntil.Equal(w.LeasedUntil) {
			t.Errorf("start %d: %+v, want %+v", i, s, w)
		}
	}
	if c := got.Claims[0]; c.ID != 1 || c.Fence != 1 || c.Proc != "w0g0" || !c.At.Equal(want.Claims[0].At) {
		t.Errorf("claim: %+v", c)
	}
}

func TestChaosSchedule(t *testing.T) {
	a := chaosSchedule(7, "postgres", 40*time.Second)
	if !reflect.DeepEqual(a, chaosSchedule(7, "postgres", 40*time.Second)) {
		t.Fatal("same seed, different schedules")
	}
	if reflect.DeepEqual(a, chaosSchedule(8, "postgres", 40*time.Second)) {
		t.Error("different seeds, same schedule")
	}
	kinds := map[string]bool{}
	for i, f := range a {
		kinds[f.kind] = true
		if f.at <= 0 || f.at >= 40*time.Second || (i > 0 && f.at <= a[i-1].at) {
			t.Errorf("fault %d at %s: out of order or outside the run", i, f.at)
		}
	}
	for _, k := range chaosFaultKinds("postgres") {
		if !kinds[k] {
			t.Errorf("no %s in a 40 s schedule", k)
		}
	}
}

// runChaosRoundTest runs a short chaos round through the CLI, with worker
// processes re-executing the test binary, and checks its result.
func runChaosRoundTest(t *testing.T, be string, args ...string) chaosRound {
	t.Setenv(asCLIEnv, "1") // for the worker processes
	checkTempRoot := privateTempRoot(t)
	r := runLab(t, append([]string{"chaos", "--backend", be, "--json", "--quiet", "--workers", "3",
		"--concurrency", "4", "--lease", "1s", "--drain-timeout", "30s"}, args...)...)
	var res chaosResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("json: %v (exit %d)", err, r.Code)
	}
	if len(res.Rounds) != 1 {
		t.Fatalf("rounds: %+v", res.Rounds)
	}
	round := res.Rounds[0]
	if r.Code != 0 || !res.OK || !round.OK {
		t.Errorf("invariants violated (exit %d): %v\n%s", r.Code, round.Violations, strings.Join(round.Examples, "\n"))
	}
	if round.Enqueued == 0 || round.Completed+round.Discarded+round.Cancelled != round.Enqueued || round.Starts < round.Completed || round.MalformedAudit != 0 {
		t.Errorf("counts: enqueued %d completed %d starts %d malformed %d", round.Enqueued, round.Completed, round.Starts, round.MalformedAudit)
	}
	if round.Faults["kill_worker"]+round.Faults["kill_leader"] == 0 || round.Faults["sigstop"] == 0 || round.WorkerRestarts == 0 {
		t.Errorf("faults: %v, restarts %d", round.Faults, round.WorkerRestarts)
	}
	// Jobs were retried (the planned failures), so the audit saw reruns.
	if round.JobsRunTwice == 0 {
		t.Error("no job ran twice: the audit missed the planned failures")
	}
	checkTempRoot()
	return round
}

// TestBenchChaosComposeSQLite: a short SQLite round (runChaosRoundTest's
// checks: faults, restarts, planned reruns, every invariant) with the
// composed workloads, small, beside its plain jobs; each workload ran.
func TestBenchChaosComposeSQLite(t *testing.T) {
	round := runChaosRoundTest(t, "sqlite", "--duration", "8s", "--jobs", "300", "--workflow-tasks", "200",
		"--batches", "4", "--many-jobs", "100", "--step-jobs", "60", "--debounce-keys", "3")
	c := round.Compose
	if c == nil {
		t.Fatal("no verdict on the composed workloads")
	}
	if c.WorkflowTasks != 200 || c.DependencyStarts == 0 || c.CallbacksRun != 8 || c.ManyJobs != 100 ||
		c.RecordedSteps != 300 || c.AwaitingSignal == 0 || c.DebounceSamples == 0 || c.DebounceJobs == 0 {
		t.Errorf("composed workloads: %+v", c)
	}
}

func TestBenchChaosPostgres(t *testing.T) {
	round := runChaosRoundTest(t, "postgres", "--duration", "12s", "--jobs", "800", "--seed", "3")
	if round.Faults["conn_kill"]+round.Faults["restart_fast"]+round.Faults["restart_immediate"] == 0 {
		t.Errorf("no server fault in a 12 s PostgreSQL round: %v", round.Faults)
	}
}

func TestBenchChaosFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "oracle"},
		{"--duration", "1s"},
		{"--workers", "1"},
		{"--lease", "10ms"},
		{"extra"},
	} {
		if r := runLab(t, append([]string{"chaos"}, args...)...); r.Code != 2 {
			t.Errorf("bench chaos %v: exit %d, want 2", args, r.Code)
		}
	}
}

// TestChaosMarkdown: the markdown output has a column per backend and a
// recovery row per fault kind, the p99 over the target in bold.
func TestChaosMarkdown(t *testing.T) {
	a := cleanAudit()
	a.Jobs[0].Rescues = []time.Time{a.Starts[1].At.Add(-time.Second)}
	a.Claims = append(a.Claims, chaosClaim{ID: 1, Fence: 2, Proc: "w1g0", At: a.Starts[1].At.Add(-10 * time.Millisecond)})
	round := chaosRound{Backend: "sqlite", Workers: 4, Concurrency: 4, LeaseMS: 1000, WorkMS: 40, FaultLog: a.Faults, chaosCheck: *checkChaos(a)}
	round.OK = round.chaosCheck.OK()
	var b strings.Builder
	if err := printChaosMarkdown(&b, &chaosResult{Rounds: []chaosRound{round}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| | sqlite |\n|---|---:|\n",
		"| lost | 0 |\n",
		"| invariants | held |\n",
		// Lease 1 s: the target is 2 × (1 s + 333 ms); job 1 took 4 s.
		"= 2,667 ms.",
		"| sqlite | kill_worker | 1 | 3,000 / 3,000 / 3,000 (1) | 990 / 990 / 990 (1) | 10 / 10 / 10 (1) | **4,000 / 4,000 / 4,000 (1)** |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
