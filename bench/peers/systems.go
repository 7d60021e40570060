package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/spoolq/spool/backend"
)

// storeKind is the kind of store a system runs on.
type storeKind string

const (
	storePostgres storeKind = "postgres"
	storeSQLite   storeKind = "sqlite"
	// storeRedis is the shared Redis as this machine runs it (no
	// persistence); storeRedisDurable a Redis started for the run that
	// appends every write to its log and fsyncs it before replying.
	storeRedis        storeKind = "redis"
	storeRedisDurable storeKind = "redis-durable"
)

// execKind says how the orchestrator starts a system's runner.
type execKind int

const (
	execSelf        execKind = iota // this binary, 'run-one'
	execRiverSQLite                 // this module built with go.riversqlite.mod, 'run-one'
	execNode                        // node graphile/runner.mjs
)

// system is one contestant: a queue with fixed settings on one kind of store.
type system struct {
	name  string
	store storeKind
	exec  execKind
	// spool names the Spool system this one is compared with ("" for Spool).
	spool string
	// workers, when set, replaces the --workers concurrency.
	workers int
	// methods are the insert methods the system runs (none: no insert).
	methods []string
	// steady reports whether the system runs the steady scenario.
	steady bool
	// about says what the system is and which settings it runs with, and why.
	about string
}

// asynqConcurrency is asynq's Concurrency, about 500, its best setting for
// throughput (default 2 × CPUs). asynq dequeues one task per Redis call on
// one goroutine whatever the concurrency, which bounds only how many
// handlers run at once.
const asynqConcurrency = 500

// allSystems lists every system, in the order runs alternate.
var allSystems = []*system{
	{name: "spool", store: storePostgres, exec: execSelf, methods: []string{methodMany, methodFast}, steady: true,
		about: "Spool on PostgreSQL (this tree), backend.Open (pgx pool of 16); per queue MaxWorkers = --workers, " +
			"Prefetch 3000, CompletionBatchMax 2000, CompletionDelay 0 (the defaults of 'spool bench drain'); completed rows kept"},
	{name: "spool-delete", store: storePostgres, exec: execSelf, steady: true,
		about: "spool with completed jobs deleted as their completion is written (CompletedRetention < 0): the work Graphile Worker " +
			"and asynq do; their rows are compared with it"},
	{name: "river", store: storePostgres, exec: execSelf, spool: "spool", methods: []string{methodMany, methodFast}, steady: true,
		about: "River with riverpgxv5; MaxWorkers = --workers; FetchCooldown 2ms and FetchPollInterval 20ms " +
			"(River's own benchmark settings, 'to maximize job throughput'; defaults 100ms/1s); pgx pool of 16 (as Spool's); completed rows kept (default)"},
	{name: "river-2000", store: storePostgres, exec: execSelf, spool: "spool", workers: 2000,
		about: "River as above with MaxWorkers 2000, the concurrency River's own benchmark uses (it found ~1-2k best); " +
			"drain only, beside the equal-concurrency run"},
	{name: "graphile", store: storePostgres, exec: execNode, spool: "spool-delete", methods: []string{methodMany}, steady: true,
		about: "Graphile Worker, no batching, --graphile-processes worker processes (default one per core, its documented way to use several cores), " +
			"each with concurrentJobs = --workers, maxPoolSize = min(concurrentJobs+2, 60/processes) " +
			"(docs: 10 or concurrentJobs+2; capped to stay inside max_connections), prepared statements on (default); insert with addJobs (add_jobs)"},
	{name: "graphile-batched", store: storePostgres, exec: execNode, spool: "spool-delete", workers: 24, steady: true,
		about: "Graphile Worker in its performance page's configuration, per process: concurrentJobs 24, maxPoolSize 25, localQueue {size: 500}, " +
			"completeJobBatchDelay 0, failJobBatchDelay 0; --graphile-processes processes as above"},
	{name: "asynq", store: storeRedis, exec: execSelf, spool: "spool-delete", workers: asynqConcurrency, methods: []string{methodOne}, steady: true,
		about: "asynq v0.26.0 on the shared Redis (no persistence: a crash loses every queued job): Concurrency 500 and TaskCheckInterval 1ms " +
			"(its best settings for throughput and latency; defaults 2×CPUs and 1s); tasks deleted on success (no Retention, its default); " +
			"insert with Client.Enqueue, one task a call, 64 at once (asynq has no bulk insert)"},
	{name: "asynq-durable", store: storeRedisDurable, exec: execSelf, spool: "spool-delete", workers: asynqConcurrency, methods: []string{methodOne}, steady: true,
		about: "asynq as above on a Redis of its own as durable as PostgreSQL: --appendonly yes --appendfsync always (every write fsynced before its reply)"},
	{name: "spool-sqlite", store: storeSQLite, exec: execSelf, methods: []string{methodMany, methodFast}, steady: true,
		about: "Spool on SQLite (backend registered for sqlite:// URLs), settings as spool; PollInterval 20ms " +
			"(SQLite has no push wake-ups between clients; the same interval as River's FetchPollInterval)"},
	{name: "river-sqlite", store: storeSQLite, exec: execRiverSQLite, spool: "spool-sqlite", methods: []string{methodMany, methodFast}, steady: true,
		about: "River with riversqlite and modernc.org/sqlite (the driver River's SQLite tests use), WAL, busy_timeout 10s, " +
			"synchronous FULL (SQLite's default), 1 open connection (River's documented setting); fetch settings as river"},
	{name: "river-sqlite-cgo", store: storeSQLite, exec: execRiverSQLite, spool: "spool-sqlite", methods: []string{methodMany, methodFast}, steady: true,
		about: "As river-sqlite over mattn/go-sqlite3 (SQLite's C code through cgo, the driver of Spool's default build), " +
			"so the SQLite rows compare the queues on the same SQLite; needs cgo"},
}

// findSystem returns the system of that name.
func findSystem(name string) (*system, error) {
	for _, s := range allSystems {
		if s.name == name {
			return s, nil
		}
	}
	names := make([]string, len(allSystems))
	for i, s := range allSystems {
		names[i] = s.name
	}
	return nil, fmt.Errorf("unknown system %q (want one of %s)", name, strings.Join(names, ", "))
}

// available reports whether the system can run, and if not why.
func (s *system) available() (bool, string) {
	if s.name == "spool-sqlite" && !slices.Contains(backend.Schemes(), "sqlite") {
		return false, "no Spool backend is registered for sqlite:// URLs in this build"
	}
	if s.store == storeRedisDurable {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return false, "needs redis-server on PATH (Debian's redis-server)"
		}
	}
	if s.name == "river-sqlite-cgo" && !cgoEnabled() {
		return false, "needs cgo (CGO_ENABLED=1 and a C compiler) for mattn/go-sqlite3"
	}
	return true, ""
}

// runsScenario reports whether the system takes part in a scenario.
func (s *system) runsScenario(scenario string) bool {
	switch scenario {
	case scenarioInsert:
		return len(s.methods) > 0
	case scenarioSteady:
		return s.steady
	}
	return true
}

// defaultSystems returns the systems a run uses when --systems is not given:
// every available one.
func defaultSystems() []*system {
	var out []*system
	for _, s := range allSystems {
		if ok, _ := s.available(); ok {
			out = append(out, s)
		}
	}
	return out
}
