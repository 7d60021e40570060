package scenarios

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// cleanCompose is a composed run in which every invariant held: task 2
// ran after task 1 (killed once, run again); batch 10 of members 11 and 12
// ran its success and complete callbacks (13, 14) after both; steps job 20
// recorded five steps (step-2 ran twice, the first run's record lost with
// its process) and had its signal before it came to wait (so it never
// parked for it).
func cleanCompose() (*chaosAudit, *composeInputs) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fin := func(ms int) *time.Time { t := at(ms); return &t }
	task, cb, steps := chaosTaskArgs{}.Kind(), chaosCallbackArgs{}.Kind(), chaosStepsArgs{}.Kind()
	a := &chaosAudit{
		Jobs: []chaosJob{
			{ID: 1, Kind: task, State: backend.StateCompleted, Fence: 2, FinalizedAt: fin(100)},
			{ID: 2, Kind: task, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(220)},
			{ID: 11, Kind: task, BatchID: 10, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(50)},
			{ID: 12, Kind: task, BatchID: 10, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(60)},
			{ID: 13, Kind: cb, BatchID: 10, Role: "success", Untracked: true, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(90)},
			{ID: 14, Kind: cb, BatchID: 10, Role: "complete", Untracked: true, State: backend.StateCompleted, Fence: 1, FinalizedAt: fin(95)},
			{ID: 20, Kind: steps, State: backend.StateCompleted, Fence: 3, FinalizedAt: fin(900)},
		},
		Starts: []chaosStart{
			{ID: 1, Fence: 1, At: at(10)}, {ID: 1, Fence: 2, At: at(80)},
			{ID: 2, Fence: 1, At: at(200)},
			{ID: 13, Fence: 1, At: at(70)}, {ID: 14, Fence: 1, At: at(75)},
		},
		StepRuns: []stepRun{{20, 1, "step-1"}, {20, 1, "step-2"}, {20, 2, "step-2"}, {20, 2, "step-3"}, {20, 3, "step-4"}, {20, 3, "step-5"}},
		Passes:   []waitPass{{ID: 20, Fence: 3, What: "signal", At: at(800)}},
	}
	rec := func(name string, fence int32, ms int) backend.StepRow {
		return backend.StepRow{JobID: 20, Name: name, Fence: fence, At: at(ms), Result: json.RawMessage("1")}
	}
	plan := &composePlan{
		tasks: []int64{1, 2},
		deps: map[int64][]composeDep{
			2:  {{parent: 1}},
			13: {{parent: 11, any: true}, {parent: 12, any: true}},
			14: {{parent: 11, any: true}, {parent: 12, any: true}},
		},
		expect:   map[int64]backend.State{1: backend.StateCompleted, 2: backend.StateCompleted, 11: backend.StateCompleted, 12: backend.StateCompleted, 20: backend.StateCompleted},
		batches:  []composeBatch{{id: 10, members: []int64{11, 12}}},
		steps:    []int64{20},
		awaiting: []int64{20},
	}
	in := &composeInputs{
		plan: plan,
		durable: map[int64]*backend.JobDurable{20: {
			Steps:   []backend.StepRow{rec("step-1", 1, 300), rec("step-2", 2, 400), rec("step-3", 2, 410), rec("step-4", 3, 810), rec("step-5", 3, 820)},
			Signals: []backend.SignalRow{{JobID: 20, Name: composeSignal, At: at(350)}},
		}},
		batches: map[int64]*backend.Batch{10: {ID: 10, Sealed: true, Total: 2, Completed: 2, FinishedAt: fin(65), OnSuccess: 13, OnComplete: 14}},
		signals: map[int64]time.Time{20: at(350)},
	}
	return a, in
}

func TestComposeCheckClean(t *testing.T) {
	a, in := cleanCompose()
	c := checkCompose(a, in)
	if len(c.Violations) != 0 {
		t.Fatalf("violations %v\n%v", c.Violations, c.Examples)
	}
	if c.DependencyStarts != 3 || c.CallbacksRun != 2 || c.RecordedSteps != 5 || c.SignalsBeforeWait != 1 || c.SignalResume.Jobs != 0 {
		t.Errorf("counts: %+v", c)
	}
}

// TestComposeCheckViolations: each breach is counted under its invariant.
func TestComposeCheckViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(a *chaosAudit, in *composeInputs)
		count  func(c *composeCheck) int64
	}{
		{"task started before its dependency committed", func(a *chaosAudit, in *composeInputs) {
			a.Starts = append(a.Starts, chaosStart{ID: 2, Fence: 2, At: a.Jobs[0].FinalizedAt.Add(-time.Millisecond)})
		}, func(c *composeCheck) int64 { return c.StartsBeforeDependencies }},
		{"callback started before a member ended", func(a *chaosAudit, in *composeInputs) {
			a.Jobs[3].State, a.Jobs[3].FinalizedAt = backend.StateRunning, nil
		}, func(c *composeCheck) int64 { return c.StartsBeforeDependencies }},
		{"task after a dependency that did not complete", func(a *chaosAudit, in *composeInputs) {
			a.Jobs[0].State = backend.StateDiscarded
		}, func(c *composeCheck) int64 { return c.StartsBeforeDependencies }},
		{"callback twice", func(a *chaosAudit, in *composeInputs) {
			dup := a.Jobs[4]
			dup.ID = 15
			a.Jobs = append(a.Jobs, dup)
		}, func(c *composeCheck) int64 { return c.CallbacksTwice }},
		{"callback lost", func(a *chaosAudit, in *composeInputs) {
			a.Jobs = a.Jobs[:5]
			a.Jobs = append(a.Jobs, chaosJob{ID: 20, Kind: chaosStepsArgs{}.Kind(), State: backend.StateCompleted, Fence: 3})
		}, func(c *composeCheck) int64 { return c.CallbacksMissing }},
		{"left waiting", func(a *chaosAudit, in *composeInputs) {
			a.Jobs[1].State = backend.StateWaiting
		}, func(c *composeCheck) int64 { return c.LeftWaiting }},
		{"step ran again after its record", func(a *chaosAudit, in *composeInputs) {
			a.StepRuns = append(a.StepRuns, stepRun{20, 3, "step-1"})
		}, func(c *composeCheck) int64 { return c.StepRerunsAfterRecord }},
		{"signal lost", func(a *chaosAudit, in *composeInputs) {
			a.Timeouts = append(a.Timeouts, 20)
		}, func(c *composeCheck) int64 { return c.SignalTimeouts }},
		{"batch not finished", func(a *chaosAudit, in *composeInputs) {
			in.batches[10].FinishedAt = nil
		}, func(c *composeCheck) int64 { return c.BatchesNotFinished }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, in := cleanCompose()
			tc.break_(a, in)
			c := checkCompose(a, in)
			if n := tc.count(c); n < 1 {
				t.Fatalf("not counted; violations %v", c.Violations)
			}
		})
	}
}

// TestDebounceSampler: two pending jobs of a key that never ran are a
// breach; two of which one ran before (an earlier cycle's retry) are not.
func TestDebounceSampler(t *testing.T) {
	args := func(key string) json.RawMessage { b, _ := json.Marshal(composeArgs{Key: key}); return b }
	ran := time.Now()
	s := &debounceSampler{}
	s.add([]*backend.JobRow{{ID: 1, Args: args("k1")}, {ID: 2, Args: args("k1"), AttemptedAt: &ran}, {ID: 3, Args: args("k2")}})
	if s.samples != 1 || s.fromInserts != 0 || s.earlierCycle != 1 {
		t.Fatalf("earlier cycle: %+v", s)
	}
	s.add([]*backend.JobRow{{ID: 1, Args: args("k1")}, {ID: 4, Args: args("k1")}})
	if s.fromInserts != 1 {
		t.Fatalf("two from inserts: %+v", s)
	}
}
