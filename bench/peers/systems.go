package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spoolq/spool/backend"
)

// storeKind is the kind of store a system runs on.
type storeKind string

const (
	storePostgres storeKind = "postgres"
	storeSQLite   storeKind = "sqlite"
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

// allSystems lists every system, in the order runs alternate.
var allSystems = []*system{
	{name: "spool", store: storePostgres, exec: execSelf, methods: []string{methodMany, methodFast}, steady: true,
		about: "Spool on PostgreSQL (this tree), backend.Open (pgx pool of 16); per queue MaxWorkers = --workers, " +
			"Prefetch 1000, CompletionBatchMax 2000, CompletionDelay 0 (the defaults of 'spool bench drain'); completed rows kept"},
	{name: "river", store: storePostgres, exec: execSelf, spool: "spool", methods: []string{methodMany, methodFast}, steady: true,
		about: "River with riverpgxv5; MaxWorkers = --workers; FetchCooldown 2ms and FetchPollInterval 20ms " +
			"(River's own benchmark settings, 'to maximize job throughput'; defaults 100ms/1s); pgx pool of 16 (as Spool's); completed rows kept (default)"},
	{name: "river-2000", store: storePostgres, exec: execSelf, spool: "spool", workers: 2000,
		about: "River as above with MaxWorkers 2000, the concurrency River's own benchmark uses (it found ~1-2k best); " +
			"drain only, beside the equal-concurrency run"},
	{name: "graphile", store: storePostgres, exec: execNode, spool: "spool", methods: []string{methodMany}, steady: true,
		about: "Graphile Worker, no batching: concurrentJobs = --workers, maxPoolSize = min(concurrentJobs+2, 40) " +
			"(docs: 10 or concurrentJobs+2; capped to stay inside max_connections), prepared statements on (default); insert with addJobs (add_jobs)"},
	{name: "graphile-batched", store: storePostgres, exec: execNode, spool: "spool", steady: true,
		about: "Graphile Worker with its batching, as its performance page's configuration: localQueue {size: 500}, " +
			"completeJobBatchDelay 0, failJobBatchDelay 0; concurrentJobs = --workers, maxPoolSize as above"},
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
