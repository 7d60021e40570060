package scenarios

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/backend"
)

// The composed workloads' checker: what workflows, batches, many-calls,
// durable steps and debounce promise beyond what checkChaos counts for
// every job (lost, run after a committed completion, stale or duplicate
// effects, overlapping leases, late starts).

// composeArgsOf decodes the fields composed jobs share.
func composeArgsOf(raw json.RawMessage) (composeArgs, error) {
	var a composeArgs
	err := json.Unmarshal(raw, &a)
	return a, err
}

// stepRun is a step function's run, as its process recorded it.
type stepRun struct {
	ID    int64
	Fence int32
	Name  string
}

// stepRunKey names one step of one job.
type stepRunKey struct {
	job  int64
	name string
}

// waitPass is a steps job's handler getting past a wait (sleep or signal).
type waitPass struct {
	ID    int64
	Fence int32
	What  string
	At    time.Time
}

// composeInputs is what checkCompose reads beyond the chaos audit: the
// plan, the steps jobs' durable records and the batches' final rows.
type composeInputs struct {
	plan     *composePlan
	durable  map[int64]*backend.JobDurable
	batches  map[int64]*backend.Batch
	signals  map[int64]time.Time
	debounce *debounceSampler
}

// composeCheck is the verdict on the composed workloads.
type composeCheck struct {
	SetupSeconds float64 `json:"setup_seconds"`

	WorkflowTasks  int `json:"workflow_tasks"`
	TasksCompleted int `json:"tasks_completed"`
	TasksDiscarded int `json:"tasks_discarded"`
	TasksCancelled int `json:"tasks_cancelled"`
	// DependencyStarts counts the task and callback starts audited against
	// their dependencies.
	DependencyStarts int `json:"dependency_starts_checked"`
	Batches          int `json:"batches"`
	BatchMembers     int `json:"batch_members"`
	CallbacksRun     int `json:"callbacks_completed"`
	ManyJobs         int `json:"many_jobs"`
	StepJobs         int `json:"step_jobs"`
	AwaitingSignal   int `json:"jobs_awaiting_a_signal"`
	StepRuns         int `json:"step_runs"`
	RecordedSteps    int `json:"recorded_steps"`
	// SignalsBeforeWait counts signals that came before their job waited.
	SignalsBeforeWait int `json:"signals_before_wait"`
	SignalRetries     int `json:"signal_sends_retried"`
	// SleepResume and SignalResume: from a sleep's end (or, for a job that
	// parked to await its signal, the signal's arrival or the park if
	// later) to the handler past the wait.
	SleepResume     phaseStats `json:"sleep_resume"`
	SignalResume    phaseStats `json:"signal_resume"`
	DebounceJobs    int        `json:"debounced_jobs"`
	DebounceSamples int        `json:"debounce_samples"`
	// DebounceEarlierCycle counts (sample, key) pairs with two pending jobs
	// of which one had run before: an earlier cycle's job retried or
	// rescued beside the key's current one (docs/unique.md: documented).
	DebounceEarlierCycle int `json:"debounce_earlier_cycle_pending"`

	StartsBeforeDependencies     int64 `json:"starts_before_dependencies"`
	WrongFinalStates             int64 `json:"wrong_final_states"`
	LeftWaiting                  int64 `json:"left_waiting"`
	BatchesNotFinished           int64 `json:"batches_not_finished"`
	CallbacksMissing             int64 `json:"callbacks_missing"`
	CallbacksUnexpected          int64 `json:"callbacks_unexpected"`
	CallbacksTwice               int64 `json:"callbacks_twice"`
	CallbacksSawUnfinishedBatch  int64 `json:"callbacks_saw_unfinished_batch"`
	StepRerunsAfterRecord        int64 `json:"step_reruns_after_record"`
	StepsWithoutRecord           int64 `json:"steps_without_record"`
	SignalTimeouts               int64 `json:"signal_timeouts"`
	SignalPayloadsWrong          int64 `json:"signal_payloads_wrong"`
	DebounceTwoPendingFromInsert int64 `json:"debounce_two_pending_from_inserts"`

	Violations []string `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

// invariants lists the invariant counters of c, by name.
func (c *composeCheck) invariants() []namedCount {
	return []namedCount{
		{"starts_before_dependencies", c.StartsBeforeDependencies},
		{"wrong_final_states", c.WrongFinalStates},
		{"left_waiting", c.LeftWaiting},
		{"batches_not_finished", c.BatchesNotFinished},
		{"callbacks_missing", c.CallbacksMissing},
		{"callbacks_unexpected", c.CallbacksUnexpected},
		{"callbacks_twice", c.CallbacksTwice},
		{"callbacks_saw_unfinished_batch", c.CallbacksSawUnfinishedBatch},
		{"step_reruns_after_record", c.StepRerunsAfterRecord},
		{"steps_without_record", c.StepsWithoutRecord},
		{"signal_timeouts", c.SignalTimeouts},
		{"signal_payloads_wrong", c.SignalPayloadsWrong},
		{"debounce_two_pending_from_inserts", c.DebounceTwoPendingFromInsert},
	}
}

// composeKinds are the composed workloads' kinds.
var composeKinds = map[string]bool{
	chaosTaskArgs{}.Kind(): true, chaosCallbackArgs{}.Kind(): true, chaosManyArgs{}.Kind(): true,
	chaosStepsArgs{}.Kind(): true, chaosDebounceArgs{}.Kind(): true,
}

// finalState reports whether s is final.
func finalState(s backend.State) bool {
	return s == backend.StateCompleted || s == backend.StateDiscarded || s == backend.StateCancelled
}

// checkCompose checks the composed workloads of a run.
func checkCompose(a *chaosAudit, in *composeInputs) *composeCheck {
	plan := in.plan
	c := &composeCheck{Violations: []string{}, SetupSeconds: plan.setup.Seconds()}
	examples := map[string]int{}
	example := func(name, format string, args ...any) {
		if examples[name] < 5 {
			examples[name]++
			c.Examples = append(c.Examples, name+": "+fmt.Sprintf(format, args...))
		}
	}
	jobs := make(map[int64]*chaosJob, len(a.Jobs))
	for i := range a.Jobs {
		jobs[a.Jobs[i].ID] = &a.Jobs[i]
	}
	starts := map[int64][]chaosStart{}
	for _, s := range a.Starts {
		starts[s.ID] = append(starts[s.ID], s)
	}

	// Every job ends as planned, and nothing is left waiting.
	for id, want := range plan.expect {
		j := jobs[id]
		switch {
		case j == nil:
			c.WrongFinalStates++
			example("wrong_final_states", "job %d has no row; want %s", id, want)
		case j.State != want:
			c.WrongFinalStates++
			example("wrong_final_states", "job %d (%s) is %s; want %s", id, j.Kind, j.State, want)
		}
	}
	for _, j := range a.Jobs {
		if composeKinds[j.Kind] && !finalState(j.State) {
			c.LeftWaiting++
			example("left_waiting", "job %d (%s) is %s after the drain", j.ID, j.Kind, j.State)
		}
	}
	c.WorkflowTasks = len(plan.tasks)
	for _, id := range plan.tasks {
		if j := jobs[id]; j != nil {
			switch j.State {
			case backend.StateCompleted:
				c.TasksCompleted++
			case backend.StateDiscarded:
				c.TasksDiscarded++
			case backend.StateCancelled:
				c.TasksCancelled++
			}
		}
	}

	// No task or callback starts before the completions (or final
	// states) of all it waits for committed.
	for child, deps := range plan.deps {
		for _, s := range starts[child] {
			c.DependencyStarts++
			for _, d := range deps {
				p := jobs[d.parent]
				switch {
				case p == nil || p.FinalizedAt == nil || !finalState(p.State):
					c.StartsBeforeDependencies++
					example("starts_before_dependencies", "job %d fence %d started at %s; its dependency %d is not final", child, s.Fence, s.At.Format("15:04:05.000000"), d.parent)
				case !s.At.After(*p.FinalizedAt):
					c.StartsBeforeDependencies++
					example("starts_before_dependencies", "job %d fence %d started at %s, before its dependency %d's %s committed at %s",
						child, s.Fence, s.At.Format("15:04:05.000000"), d.parent, p.State, p.FinalizedAt.Format("15:04:05.000000"))
				case !d.any && p.State != backend.StateCompleted:
					c.StartsBeforeDependencies++
					example("starts_before_dependencies", "job %d started though its dependency %d ended %s", child, d.parent, p.State)
				}
			}
		}
	}

	// Batches: final, counted, each callback whose condition held made
	// available once and completed, the others gone.
	callbacks := map[string][]*chaosJob{}
	for i := range a.Jobs {
		j := &a.Jobs[i]
		if j.Kind == (chaosCallbackArgs{}).Kind() {
			k := fmt.Sprintf("%d/%s", j.BatchID, j.Role)
			callbacks[k] = append(callbacks[k], j)
		}
	}
	c.Batches = len(plan.batches)
	for _, b := range plan.batches {
		c.BatchMembers += len(b.members)
		row := in.batches[b.id]
		if row == nil || row.FinishedAt == nil || !row.Sealed || row.Total != len(b.members) ||
			row.Discarded != b.discards || row.Completed != len(b.members)-b.discards {
			c.BatchesNotFinished++
			example("batches_not_finished", "batch %d: %+v; want %d members, %d discarded, finished", b.id, row, len(b.members), b.discards)
		}
		for _, role := range composeRoles {
			want := role == "complete" || (role == "success") == (b.discards == 0)
			got := callbacks[fmt.Sprintf("%d/%s", b.id, role)]
			switch {
			case len(got) > 1:
				c.CallbacksTwice++
				example("callbacks_twice", "batch %d has %d %s callbacks", b.id, len(got), role)
			case want && len(got) == 0:
				c.CallbacksMissing++
				example("callbacks_missing", "batch %d: no %s callback", b.id, role)
			case !want && len(got) > 0:
				c.CallbacksUnexpected++
				example("callbacks_unexpected", "batch %d: a %s callback (%s) though its condition did not hold", b.id, role, got[0].State)
			case want && got[0].State != backend.StateCompleted:
				c.CallbacksMissing++
				example("callbacks_missing", "batch %d: its %s callback is %s", b.id, role, got[0].State)
			case want:
				c.CallbacksRun++
			}
		}
	}
	c.CallbacksSawUnfinishedBatch = int64(countPrefix(a.WorkerViolations, "callback"))
	c.SignalPayloadsWrong = int64(countPrefix(a.WorkerViolations, "signal"))
	for _, v := range a.WorkerViolations {
		example("worker", "%s", v)
	}
	c.ManyJobs = len(plan.many)

	// Steps: no step whose record committed runs again, every step
	// recorded, no signal lost.
	c.StepJobs, c.AwaitingSignal, c.StepRuns = len(plan.steps), len(plan.awaiting), len(a.StepRuns)
	runs := map[stepRunKey][]int32{}
	for _, r := range a.StepRuns {
		k := stepRunKey{r.ID, r.Name}
		runs[k] = append(runs[k], r.Fence)
	}
	passes := map[string]time.Time{}
	for _, p := range a.Passes {
		k := fmt.Sprintf("%d/%s", p.ID, p.What)
		if t, ok := passes[k]; !ok || p.At.Before(t) {
			passes[k] = p.At
		}
	}
	var sleepLag, signalLag []time.Duration
	for _, id := range plan.steps {
		d := in.durable[id]
		if d == nil {
			c.StepsWithoutRecord += 5
			example("steps_without_record", "job %d: no durable records read", id)
			continue
		}
		recorded := map[string]backend.StepRow{}
		for _, s := range d.Steps {
			recorded[s.Name] = s
		}
		for n := 1; n <= 5; n++ {
			name := durableStepName(n)
			rec, ok := recorded[name]
			if !ok {
				c.StepsWithoutRecord++
				example("steps_without_record", "job %d: %s has no record", id, name)
				continue
			}
			c.RecordedSteps++
			for _, f := range runs[stepRunKey{id, name}] {
				if f > rec.Fence {
					c.StepRerunsAfterRecord++
					example("step_reruns_after_record", "job %d: %s recorded under fence %d ran again under fence %d", id, name, rec.Fence, f)
				}
			}
		}
		if rec, ok := recorded["spool:sleep:1"]; ok {
			var w waitRecordJSON
			if json.Unmarshal(rec.Result, &w) == nil {
				if at, ok := passes[fmt.Sprintf("%d/sleep", id)]; ok {
					sleepLag = append(sleepLag, max(0, at.Sub(rec.At.Add(time.Duration(w.For)))))
				}
			}
		}
		var sig *backend.SignalRow
		for i := range d.Signals {
			if d.Signals[i].Name == composeSignal {
				sig = &d.Signals[i]
			}
		}
		if sig == nil {
			continue
		}
		wait, waited := recorded["spool:await:"+composeSignal]
		if !waited || sig.At.Before(wait.At) {
			c.SignalsBeforeWait++
		}
		if !waited {
			continue // the signal was there when the job came to wait: no park, no resume
		}
		due := sig.At
		if wait.At.After(due) {
			due = wait.At
		}
		if at, ok := passes[fmt.Sprintf("%d/signal", id)]; ok {
			signalLag = append(signalLag, max(0, at.Sub(due)))
		}
	}
	for _, id := range plan.awaiting {
		if _, ok := in.signals[id]; !ok {
			c.SignalTimeouts++ // never sent: the run cannot vouch for it
			example("signal_timeouts", "job %d: its signal was never sent", id)
		}
	}
	c.SignalTimeouts += int64(len(a.Timeouts))
	for _, id := range a.Timeouts {
		example("signal_timeouts", "job %d: its signal wait timed out", id)
	}
	c.SleepResume, c.SignalResume = phaseOf(sleepLag), phaseOf(signalLag)

	// Debounce.
	for _, j := range a.Jobs {
		if j.Kind == (chaosDebounceArgs{}).Kind() {
			c.DebounceJobs++
		}
	}
	if s := in.debounce; s != nil {
		s.mu.Lock()
		c.DebounceSamples, c.DebounceEarlierCycle = s.samples, s.earlierCycle
		c.DebounceTwoPendingFromInsert = int64(s.fromInserts)
		c.Examples = append(c.Examples, s.examples...)
		s.mu.Unlock()
	}

	c.Violations = violated(c.invariants())
	return c
}

// waitRecordJSON is a wait's recorded result (spool's waitRecord).
type waitRecordJSON struct {
	For int64 `json:"for_ns"`
}

// countPrefix counts the strings of ss that begin with prefix.
func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// composeRows are the figures of a composed run, in print order.
func (c *composeCheck) rows() []struct{ name, value string } {
	n := func(v int) string { return thousands(float64(v)) }
	return []struct{ name, value string }{
		{"inserted before the faults (s)", fmt.Sprintf("%.1f", c.SetupSeconds)},
		{"workflow tasks (completed / discarded / cancelled)", fmt.Sprintf("%s (%s / %s / %s)", n(c.WorkflowTasks), n(c.TasksCompleted), n(c.TasksDiscarded), n(c.TasksCancelled))},
		{"task and callback starts audited against their dependencies", n(c.DependencyStarts)},
		{"batches (members, callbacks completed)", fmt.Sprintf("%s (%s, %s)", n(c.Batches), n(c.BatchMembers), n(c.CallbacksRun))},
		{"many-worker jobs", n(c.ManyJobs)},
		{"steps jobs (awaiting a signal, signals before the wait)", fmt.Sprintf("%s (%s, %s)", n(c.StepJobs), n(c.AwaitingSignal), n(c.SignalsBeforeWait))},
		{"step function runs for recorded steps", fmt.Sprintf("%s for %s", n(c.StepRuns), n(c.RecordedSteps))},
		{"sleep end → resumed, ms p50 / p99 / max", phaseCell(c.SleepResume)},
		{"signal → resumed, ms p50 / p99 / max", phaseCell(c.SignalResume)},
		{"debounced jobs (samples, earlier-cycle pairs)", fmt.Sprintf("%s (%s, %s)", n(c.DebounceJobs), n(c.DebounceSamples), n(c.DebounceEarlierCycle))},
	}
}

// printCompose prints the composed workloads' figures and invariants.
func printCompose(w io.Writer, c *composeCheck) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "composed workloads\t\t\n")
	for _, r := range c.rows() {
		fmt.Fprintf(tw, "%s\t%s\t\n", r.name, r.value)
	}
	printInvariants(tw, c.invariants())
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range c.Examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	_, err := fmt.Fprintln(w)
	return err
}
