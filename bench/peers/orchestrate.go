package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// config is one invocation's plan.
type config struct {
	systems    []*system
	scenarios  []string
	reps       int
	jobs       int // drain
	insertJobs int
	chunk      int
	workers    int
	rate       float64
	duration   time.Duration
	warmup     time.Duration
	inflight   int
	runTimeout time.Duration
	// graphileProcesses is how many worker processes Graphile Worker runs.
	graphileProcesses int
}

// entry is one contestant of a scenario: a system, and for insert a method.
type entry struct {
	sys    *system
	method string
}

// entries lists the contestants of a scenario, in the systems' order.
func (c *config) entries(scenario string) []entry {
	var out []entry
	for _, s := range c.systems {
		if !s.runsScenario(scenario) {
			continue
		}
		if scenario != scenarioInsert {
			out = append(out, entry{sys: s})
			continue
		}
		for _, m := range s.methods {
			out = append(out, entry{sys: s, method: m})
		}
	}
	return out
}

// spec returns the run spec of one entry on a store.
func (c *config) spec(scenario string, e entry, st *freshStore) *runSpec {
	s := &runSpec{
		System: e.sys.name, Scenario: scenario, URL: st.URL, Path: st.Path,
		Workers: c.workers, Chunk: c.chunk, Method: e.method,
	}
	if e.sys.workers > 0 {
		s.Workers = e.sys.workers
	}
	if e.sys.exec == execNode {
		s.Processes = c.graphileProcesses
	}
	switch scenario {
	case scenarioDrain:
		s.Jobs = c.jobs
	case scenarioInsert:
		s.Jobs = c.insertJobs
	case scenarioSteady:
		s.Rate, s.Inflight = c.rate, c.inflight
		s.DurationMS, s.WarmupMS = c.duration.Milliseconds(), c.warmup.Milliseconds()
	}
	return s
}

// runRecord is one run's outcome.
type runRecord struct {
	Scenario string     `json:"scenario"`
	System   string     `json:"system"`
	Method   string     `json:"method,omitempty"`
	Rep      int        `json:"rep"`
	Store    string     `json:"store"`
	Result   *runResult `json:"result,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// orchestrate runs every scenario's entries reps times, alternating: each
// repetition runs every entry once, starting one entry later than the
// previous repetition, so no system always runs first or right after
// another. Every run gets a fresh store, dropped right after it.
func orchestrate(ctx context.Context, cfg *config, l *launcher, maker *storeMaker, progress io.Writer) []runRecord {
	var records []runRecord
	for _, scenario := range cfg.scenarios {
		entries := cfg.entries(scenario)
		total := len(entries) * cfg.reps
		n := 0
		for rep := range cfg.reps {
			for k := range entries {
				if ctx.Err() != nil {
					return records
				}
				e := entries[(k+rep)%len(entries)]
				n++
				rec := runEntry(ctx, cfg, l, maker, scenario, e)
				rec.Rep = rep + 1
				records = append(records, rec)
				fmt.Fprintf(progress, "peers: [%s %d/%d] %s, rep %d: %s\n", scenario, n, total, label(e), rep+1, brief(&rec))
			}
		}
	}
	return records
}

// runEntry runs one entry on a fresh store and checks its counts.
func runEntry(ctx context.Context, cfg *config, l *launcher, maker *storeMaker, scenario string, e entry) runRecord {
	rec := runRecord{Scenario: scenario, System: e.sys.name, Method: e.method}
	st, err := maker.newStore(ctx, e.sys.store, e.sys.name)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Store = st.Name
	runCtx, cancel := context.WithTimeoutCause(ctx, cfg.runTimeout, fmt.Errorf("run took longer than --run-timeout %s", cfg.runTimeout))
	res, err := l.run(runCtx, e.sys, cfg.spec(scenario, e, st))
	cancel()
	if err == nil {
		err = checkResult(scenario, res)
	}
	if derr := st.Drop(); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		rec.Error = err.Error()
	}
	rec.Result = res
	return rec
}

// checkResult checks that the store agrees with the run: every job
// completed (or stored) exactly once.
func checkResult(scenario string, r *runResult) error {
	got := r.Completed
	if scenario == scenarioInsert {
		got = r.Stored
	}
	switch {
	case got != r.Expected:
		return fmt.Errorf("check: the store counts %d jobs done, want %d", got, r.Expected)
	case r.Duplicates != 0:
		return fmt.Errorf("check: %d jobs ran more than once", r.Duplicates)
	}
	return nil
}

// label names an entry in progress and tables.
func label(e entry) string {
	if e.method == "" {
		return e.sys.name
	}
	return e.sys.name + " " + methodName(e.sys, e.method)
}

// methodName is the API name of an insert method for a system.
func methodName(sys *system, method string) string {
	switch {
	case sys.exec == execNode:
		return "addJobs"
	case method == methodOne:
		return "Enqueue"
	case method == methodFast:
		return "InsertManyFast"
	}
	return "InsertMany"
}

// brief is a one-line account of a run.
func brief(r *runRecord) string {
	if r.Error != "" {
		return "FAILED: " + r.Error
	}
	res := r.Result
	if res.Latency != nil {
		return fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, max %.1f ms at %.0f jobs/s", res.Latency.P50, res.Latency.P99, res.Latency.Max, res.AchievedRate)
	}
	return fmt.Sprintf("%s jobs/s (%.3f s)", humanInt(res.JobsPerS), res.Seconds)
}
