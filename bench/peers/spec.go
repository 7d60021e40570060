package main

import (
	"encoding/json"
	"fmt"
	"time"
)

// Scenarios every system runs.
const (
	scenarioDrain  = "drain"
	scenarioInsert = "insert"
	scenarioSteady = "steady"
)

// Insert methods of the insert scenario. Graphile Worker has one bulk path
// (add_jobs), reported as methodMany.
const (
	methodMany = "many" // the bulk insert that returns ids (Spool/River InsertMany, Graphile addJobs)
	methodFast = "fast" // the bulk insert that returns a count only (COPY: InsertManyFast)
	methodOne  = "one"  // one job a call, asyncInserts calls at once (asynq: no bulk insert)
)

// asyncInserts is how many single-job insert calls methodOne makes at once.
const asyncInserts = 64

// jobKind is the kind (River, Spool) or task identifier (Graphile) of the
// benchmark's no-op jobs. Their args are {"seq": n}, the job's number, so
// that a run can check every job ran exactly once and match insert and start
// times in the steady scenario.
const jobKind = "peer_noop"

// runSpec is one run of one scenario by one system on a fresh store. The
// orchestrator writes it as JSON on the runner's stdin; Go runners and the
// Node runner (graphile/runner.mjs) read the same fields.
type runSpec struct {
	System   string `json:"system"`
	Scenario string `json:"scenario"`
	// URL is the fresh store: a postgres:// URL of an empty database, or a
	// sqlite:// URL whose path is a file in an empty directory.
	URL string `json:"url"`
	// Path is the SQLite file (empty for PostgreSQL).
	Path string `json:"path,omitempty"`
	// Jobs is how many jobs drain works or insert writes.
	Jobs int `json:"jobs"`
	// Workers is the worker concurrency (River MaxWorkers, Spool MaxWorkers,
	// Graphile concurrentJobs), unless the system fixes its own.
	Workers int `json:"workers"`
	// Chunk is how many jobs one bulk insert call writes.
	Chunk int `json:"chunk"`
	// Method is the insert scenario's method (methodMany or methodFast).
	Method string `json:"method,omitempty"`
	// Rate is the steady scenario's insert rate, jobs per second.
	Rate float64 `json:"rate,omitempty"`
	// DurationMS is how long the steady scenario inserts, after WarmupMS.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// WarmupMS is how long the steady scenario inserts before it measures.
	WarmupMS int64 `json:"warmup_ms,omitempty"`
	// Inflight bounds the steady inserter's concurrent insert transactions.
	Inflight int `json:"inflight,omitempty"`
	// Processes is how many worker processes the system runs (Graphile
	// Worker: one per core, each with Workers); 0 or 1: one.
	Processes int `json:"processes,omitempty"`
}

func (s *runSpec) duration() time.Duration { return time.Duration(s.DurationMS) * time.Millisecond }
func (s *runSpec) warmup() time.Duration   { return time.Duration(s.WarmupMS) * time.Millisecond }

// steadyJobs returns how many jobs the steady scenario inserts in all, and
// how many of the first ones are warm-up.
func (s *runSpec) steadyJobs() (total, warm int) {
	warm = int(s.Rate * s.warmup().Seconds())
	return warm + int(s.Rate*s.duration().Seconds()), warm
}

// validate checks the fields the scenario needs.
func (s *runSpec) validate() error {
	switch {
	case s.System == "":
		return fmt.Errorf("run spec: no system")
	case s.URL == "":
		return fmt.Errorf("run spec: no store URL")
	case s.Workers < 1:
		return fmt.Errorf("run spec: workers %d < 1", s.Workers)
	}
	switch s.Scenario {
	case scenarioDrain:
		if s.Jobs < 1 || s.Chunk < 1 {
			return fmt.Errorf("run spec: drain needs jobs and chunk ≥ 1")
		}
	case scenarioInsert:
		if s.Jobs < 1 || s.Chunk < 1 || (s.Method != methodMany && s.Method != methodFast && s.Method != methodOne) {
			return fmt.Errorf("run spec: insert needs jobs, chunk ≥ 1 and method many, fast or one")
		}
	case scenarioSteady:
		if total, _ := s.steadyJobs(); s.Rate <= 0 || total < 1 || s.Inflight < 1 {
			return fmt.Errorf("run spec: steady needs a rate, a duration and inflight ≥ 1")
		}
	default:
		return fmt.Errorf("run spec: unknown scenario %q", s.Scenario)
	}
	return nil
}

// runResult is what a runner reports for one run, as JSON on its stdout.
type runResult struct {
	System   string `json:"system"`
	Scenario string `json:"scenario"`
	Method   string `json:"method,omitempty"`
	// Version names the system's exact version ("river v0.51.1").
	Version string `json:"version"`
	// Settings are the settings the runner used, by name.
	Settings map[string]string `json:"settings"`

	// Jobs is how many jobs the run measured.
	Jobs int `json:"jobs"`
	// Seconds is the measured time: drain from the client's start until the
	// last completion was written; insert the bulk insert calls alone.
	Seconds  float64 `json:"seconds,omitempty"`
	JobsPerS float64 `json:"jobs_per_s,omitempty"`
	// InsertJobsPerS is the rate of drain's untimed preparatory insert.
	InsertJobsPerS float64 `json:"insert_jobs_per_s,omitempty"`

	// Steady: pickup latency (insert commit to handler start), milliseconds.
	Latency *latencySummary `json:"latency_ms,omitempty"`
	// AchievedRate is the steady inserter's measured rate, jobs per second.
	AchievedRate float64 `json:"achieved_rate,omitempty"`

	// Completed is how many of the run's jobs the store reports finished
	// (completed rows; for Graphile Worker, jobs gone from its table),
	// counted by SQL at the end of a drain or steady run.
	Completed int64 `json:"completed"`
	// Stored is how many jobs the store holds after an insert run.
	Stored int64 `json:"stored,omitempty"`
	// Expected is what Completed (drain, steady) or Stored (insert) must be.
	Expected int64 `json:"expected"`
	// Duplicates counts handler calls beyond the first for a job.
	Duplicates int64 `json:"duplicates"`
}

// latencySummary holds percentiles of a latency sample, in milliseconds.
type latencySummary struct {
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p99_9"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

// decodeResult parses a runner's stdout.
func decodeResult(out []byte) (*runResult, error) {
	var r runResult
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("decode runner result: %w (output %q)", err, truncate(string(out), 300))
	}
	return &r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
