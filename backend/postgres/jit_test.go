package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

// TestFinishAndHeartbeatNotJITCompiled: over a pool of the caller's (New),
// whose sessions keep the server's jit setting, the finishes and
// heartbeats, which run with plan settings that can force a disabled scan
// and so a cost far above jit_above_cost, are never JIT-compiled. The
// server here compiles every statement its sessions allow (jit_above_cost
// 0) and counts compiled functions per statement (pg_stat_statements).
func TestFinishAndHeartbeatNotJITCompiled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters, err := dbserver.StartClusters(ctx, 1, "spool-jit-test-", dbserver.Options{Settings: []string{
		"shared_preload_libraries = 'pg_stat_statements'", "jit = on", "jit_above_cost = 0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clusters.Stop(); err != nil {
			t.Error(err)
		}
	})
	be := newFreshBackendsAt(t, clusters.URLs())[0].(*postgres.Backend)
	pool := be.Pool()
	var jitAvailable bool
	if err := pool.QueryRow(ctx, "SELECT pg_jit_available()").Scan(&jitAvailable); err != nil {
		t.Fatal(err)
	}
	if !jitAvailable {
		t.Fatal("the server cannot JIT-compile (install PostgreSQL's LLVM JIT, Debian's postgresql-15 has it): the test would prove nothing")
	}
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	insert := func() {
		t.Helper()
		jobs := make([]*backend.JobInsertParams, 2)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "jit", Kind: "note", Args: []byte(`{}`), MaxAttempts: 3}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
	}
	reset := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
	}
	type stmt struct {
		query     string
		calls     int64
		functions int64
		heartbeat bool
	}
	var stmts []stmt
	// collect adds the heartbeats (they set leased_until to greatest(...))
	// and the finishes and completions (they read the running fence, or
	// the outcomes' delays) run since the last reset.
	collect := func() {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 100), calls, jit_functions,
  strpos(query, 'greatest(') > 0
  FROM pg_stat_statements WHERE strpos(query, $1) > 0
  AND (strpos(query, 'greatest(') > 0 OR strpos(query, 'run_fence') > 0 OR strpos(query, 'delay_us') > 0)`,
			be.Schema())
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stmt, error) {
			var s stmt
			err := r.Scan(&s.query, &s.calls, &s.functions, &s.heartbeat)
			return s, err
		})
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, got...)
	}
	// Two claims: the first into a lease row, the second, after a claim
	// that came back short, in place; each claimed job is extended, then
	// one retried and the other completed, by the statements of its place.
	for claim := range 2 {
		insert()
		reset() // the statements of the claim, heartbeat and finish only
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "jit", Max: 5, Lease: time.Minute, ClaimID: fmt.Sprintf("jit#%d", claim)})
		if err != nil || len(rows) != 2 {
			t.Fatalf("claim %d: %d rows, %v", claim, len(rows), err)
		}
		hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: []backend.LeaseRef{rows[0].Lease(), rows[1].Lease()}, Lease: time.Minute})
		if err != nil || len(hb.Lost) != 0 {
			t.Fatalf("heartbeat %d: %+v %v", claim, hb, err)
		}
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
			{Lease: rows[0].Lease(), Outcome: backend.OutcomeRetry, Delay: time.Second, Error: &backend.AttemptError{Attempt: 1, Error: "again"}},
			{Lease: rows[1].Lease(), Outcome: backend.OutcomeComplete},
		}})
		if err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish %d: %+v %v", claim, res, err)
		}
		collect()
	}
	heartbeats := 0
	for _, s := range stmts {
		t.Logf("%d calls, %d functions compiled: %s", s.calls, s.functions, s.query)
		if s.functions > 0 {
			t.Errorf("JIT-compiled %d functions in %d calls: %s", s.functions, s.calls, s.query)
		}
		if s.heartbeat {
			heartbeats++
		}
	}
	if heartbeats == 0 || len(stmts) < 3 {
		t.Fatalf("%d statements seen, %d of them heartbeats: the test did not run what it checks", len(stmts), heartbeats)
	}
}
