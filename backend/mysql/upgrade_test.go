package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestUpgradeNarrowClaims migrates a database holding jobs in every phase
// from schema 11 to 12 (phase and flow_wait replace pending, the lease
// index goes) and checks that the jobs are claimed, rescued, kept unique,
// taken by flow key and cleaned up as before.
func TestUpgradeNarrowClaims(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if err := be.MigrateTo(ctx, 11); err != nil {
		t.Fatalf("migrate to 11: %v", err)
	}
	jobs := []*backend.JobInsertParams{
		{Queue: "q", Kind: "plain", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "keyed", Args: []byte(`{}`), MaxAttempts: 3, FlowKey: "k"},
		{Queue: "q", Kind: "unique", Args: []byte(`{}`), MaxAttempts: 3, UniqueKey: "u1", UniqueStates: backend.UniqueStatesRequired},
		{Queue: "q", Kind: "expired", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "done", Args: []byte(`{}`), MaxAttempts: 3},
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("insert on schema 11: %v", err)
	}
	ids := res.IDs
	db, schema := be.DB(), "`"+be.Database()+"`"
	// A job whose lease ended (its worker died) and a job finished an hour
	// ago, written as version 11's statements wrote them.
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'running', attempt = 1, fence = 1,
  leased_until = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, leased_by = 'gone', attempted_at = UTC_TIMESTAMP(6) WHERE id = ?`, ids[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'completed', attempt = 1,
  finalized_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?`, ids[4]); err != nil {
		t.Fatal(err)
	}

	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 11 to the latest: %v", err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != v.Latest || v.Latest < 12 {
		t.Fatalf("schema version %+v, %v; want the latest", v, err)
	}
	var phases string
	if err := db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(phase ORDER BY id), GROUP_CONCAT(COALESCE(flow_wait, '-') ORDER BY id)
FROM `+schema+`.spool_jobs`).Scan(&phases, new(string)); err != nil || phases != "1,1,1,2,0" {
		t.Fatalf("phases after the upgrade: %q, %v; want 1,1,1,2,0", phases, err)
	}

	rescued, err := be.JobRescue(ctx, &backend.JobRescueParams{})
	if err != nil || rescued.Retried != 1 {
		t.Fatalf("rescue after the upgrade: %+v, %v; want the expired job retried", rescued, err)
	}
	dup, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "q", Kind: "unique", Args: []byte(`{}`), MaxAttempts: 3, UniqueKey: "u1", UniqueStates: backend.UniqueStatesRequired},
	}})
	if err != nil || len(dup.IDs) != 1 || dup.IDs[0] != ids[2] {
		t.Fatalf("unique insert after the upgrade: %+v, %v; want job %d reported", dup, err, ids[2])
	}
	var keys []string
	err = be.JobClaimFlow(ctx, &backend.JobClaimFlowParams{Queue: "q", Lease: time.Minute, ClaimID: "f"}, func(tx backend.FlowTx) error {
		var err error
		keys, err = tx.FlowKeys(ctx, "", 10)
		return err
	})
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("flow keys after the upgrade: %q, %v; want [k]", keys, err)
	}
	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want the 4 pending", len(claimed), err)
	}
	fs := make([]backend.JobFinish, len(claimed))
	for i, j := range claimed {
		fs[i] = backend.JobFinish{Lease: j.Lease(), Outcome: backend.OutcomeComplete}
	}
	if fr, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(fr.Rejected) != 0 {
		t.Fatalf("finish after the upgrade: %+v, %v", fr, err)
	}
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: 30 * time.Minute})
	if err != nil || n != 1 {
		t.Fatalf("cleanup after the upgrade: %d, %v; want the job finished an hour ago", n, err)
	}
}

// TestUpgradeRowsInPlace migrates a database holding jobs in every state
// from schema 15 to 16 (sentinels for no lease, attempt or finish time; no
// CHECK constraints) and checks that no NULL time is left, that every
// reader maps the sentinels back to none, and that the jobs are rescued,
// claimed, finished, retried, counted and cleaned up as before.
func TestUpgradeRowsInPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if err := be.MigrateTo(ctx, 15); err != nil {
		t.Fatalf("migrate to 15: %v", err)
	}
	kinds := []string{"pending", "scheduled", "running", "expired", "completed", "old", "discarded", "cancelled", "waiting"}
	var jobs []*backend.JobInsertParams
	for _, k := range kinds {
		jobs = append(jobs, &backend.JobInsertParams{Queue: "q", Kind: k, Args: []byte(`{}`), MaxAttempts: 3})
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("insert on schema 15: %v", err)
	}
	id := map[string]int64{}
	for i, k := range kinds {
		id[k] = res.IDs[i]
	}
	db, schema := be.DB(), "`"+be.Database()+"`"
	// Each state as version 15's statements wrote it.
	for _, s := range []struct {
		kind, set string
	}{
		{"scheduled", `state = 'scheduled', run_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR`},
		{"running", `state = 'running', attempt = 1, fence = 1, leased_until = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, leased_by = 'live', attempted_at = UTC_TIMESTAMP(6)`},
		{"expired", `state = 'running', attempt = 1, fence = 1, leased_until = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, leased_by = 'gone', attempted_at = UTC_TIMESTAMP(6)`},
		{"completed", `state = 'completed', attempt = 1, attempted_at = UTC_TIMESTAMP(6), finalized_at = UTC_TIMESTAMP(6)`},
		{"old", `state = 'completed', attempt = 1, attempted_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR, finalized_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR`},
		{"discarded", `state = 'discarded', attempt = 3, attempted_at = UTC_TIMESTAMP(6), finalized_at = UTC_TIMESTAMP(6)`},
		{"cancelled", `state = 'cancelled', finalized_at = UTC_TIMESTAMP(6)`},
		{"waiting", `state = 'waiting', wait_kind = 'deps', deps_left = 1`},
	} {
		if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET `+s.set+` WHERE id = ?`, id[s.kind]); err != nil {
			t.Fatalf("write a %s job on schema 15: %v", s.kind, err)
		}
	}

	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 15 to the latest: %v", err)
	}
	var nulls, checks int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+schema+`.spool_jobs
WHERE leased_until IS NULL OR attempted_at IS NULL OR finalized_at IS NULL`).Scan(&nulls); err != nil || nulls != 0 {
		t.Fatalf("rows with a NULL time after the upgrade: %d, %v; want none", nulls, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'spool_jobs' AND CONSTRAINT_TYPE = 'CHECK' AND CONSTRAINT_NAME LIKE 'spool\_jobs\_%'`,
		be.Database()).Scan(&checks); err != nil || checks != 0 {
		t.Fatalf("CHECK constraints after the upgrade: %d, %v; want none", checks, err)
	}
	for _, k := range kinds {
		j, err := be.JobGet(ctx, id[k])
		if err != nil {
			t.Fatalf("get the %s job: %v", k, err)
		}
		running := j.State == backend.StateRunning
		if (j.LeasedUntil != nil) != running || (j.LeasedBy != "") != running {
			t.Errorf("%s job (%s): lease %v by %q; want one exactly while running", k, j.State, j.LeasedUntil, j.LeasedBy)
		}
		if attempted := j.Attempt > 0; (j.AttemptedAt != nil) != attempted {
			t.Errorf("%s job: attempted_at %v after %d attempts", k, j.AttemptedAt, j.Attempt)
		}
		if (j.FinalizedAt != nil) != j.State.IsFinal() {
			t.Errorf("%s job (%s): finalized_at %v", k, j.State, j.FinalizedAt)
		}
	}

	var short int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+schema+`.spool_jobs WHERE OCTET_LENGTH(leased_by) <> 64`).Scan(&short); err != nil || short != 0 {
		t.Fatalf("lease holders not 64 bytes wide after the upgrade: %d, %v", short, err)
	}
	if j, err := be.JobGet(ctx, id["running"]); err != nil || j.LeasedBy != "live" {
		t.Fatalf("the running job after the upgrade: %+v, %v; want its holder", j, err)
	}
	rescued, err := be.JobRescue(ctx, &backend.JobRescueParams{})
	if err != nil || rescued.Retried != 1 {
		t.Fatalf("rescue after the upgrade: %+v, %v; want the expired job retried", rescued, err)
	}
	if j, err := be.JobGet(ctx, id["expired"]); err != nil || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "the worker gone stopped") {
		t.Fatalf("the rescued job: %+v, %v; want its holder named in the error", j, err)
	}
	// The live lease is released by its holder's id, as written by version 15.
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "live"}); err != nil || n != 1 {
		t.Fatalf("release after the upgrade: %d, %v; want the running job", n, err)
	}
	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want the pending, the rescued and the released job", len(claimed), err)
	}
	fs := make([]backend.JobFinish, len(claimed))
	for i, j := range claimed {
		fs[i] = backend.JobFinish{Lease: j.Lease(), Outcome: backend.OutcomeComplete}
	}
	if fr, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(fr.Rejected) != 0 {
		t.Fatalf("finish after the upgrade: %+v, %v", fr, err)
	}
	for _, j := range claimed {
		got, err := be.JobGet(ctx, j.ID)
		if err != nil || got.State != backend.StateCompleted || got.LeasedUntil != nil || got.LeasedBy != "" || got.FinalizedAt == nil || got.AttemptedAt == nil {
			t.Fatalf("job %d finished after the upgrade: %+v, %v; want completed, no lease, attempted and finalized", j.ID, got, err)
		}
	}
	retried, err := be.JobRetry(ctx, &backend.JobRetryParams{ID: id["discarded"]})
	if err != nil || retried.State != backend.StateAvailable || retried.FinalizedAt != nil {
		t.Fatalf("retry after the upgrade: %+v, %v; want available, not finalized", retried, err)
	}
	buckets, err := be.JobThroughput(ctx, &backend.JobThroughputParams{Window: 2 * time.Hour, Bucket: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var done int64
	for _, b := range buckets {
		done += b.Completed + b.Discarded + b.Cancelled
	}
	if done != 6 { // completed, old, cancelled and the three just finished
		t.Fatalf("throughput after the upgrade: %d finished, %v; want 6", done, buckets)
	}
	finished, err := be.JobFinishedSince(ctx, &backend.JobFinishedSinceParams{Since: time.Now().Add(-90 * time.Minute)})
	if err != nil || len(finished) != 6 {
		t.Fatalf("finished since after the upgrade: %d, %v; want 6", len(finished), err)
	}
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: 30 * time.Minute})
	if err != nil || n != 1 {
		t.Fatalf("cleanup after the upgrade: %d, %v; want the job finished an hour ago", n, err)
	}
}

// TestUpgradeLooker migrates a database holding jobs from schema 17 to 18
// (the looker's lease): the jobs already there are claimed, and a
// listener then hears a new job another process inserts.
func TestUpgradeLooker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, lookerParams)
	if err := be.MigrateTo(ctx, 17); err != nil {
		t.Fatalf("migrate to 17: %v", err)
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "q", Kind: "old", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "old", Args: []byte(`{}`), MaxAttempts: 3},
	}}); err != nil {
		t.Fatalf("insert on schema 17: %v", err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate to 18: %v", err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "upgrade"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want 2", len(rows), err)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wakes := listenWakes(t, lctx, openBackend(t, name, lookerParams))
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "after_upgrade", Kind: "new", Args: []byte(`{}`), MaxAttempts: 3},
	}}); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wakes, "after_upgrade", "the listener after the upgrade")
}

// TestUpgradeMemberIndex migrates a database holding a plain job, a
// workflow (a task with a dependent, and its dependent waiting) and a
// sealed batch (three members and a callback), written as schema 18's
// statements wrote them, from schema 18 to the latest (19: one index,
// spool_jobs_member, for the workflow, batch and unsettled indexes; 20:
// that index's readers moved to spool_job_keys), after a run of 19 that
// stopped part way (the new index added, one old one dropped, the version
// not recorded). It checks that spool_jobs has none of those indexes left,
// then that the workflow's graph and the batch's members read as before,
// that the leader's sweep settles a task a write outside a finish left
// final, that finishing the members releases the callback, and that
// retention keeps a finished workflow's tasks until every one is final.
func TestUpgradeMemberIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if err := be.MigrateTo(ctx, 18); err != nil {
		t.Fatalf("migrate to 18: %v", err)
	}
	job := func(kind string) *backend.JobInsertParams {
		return &backend.JobInsertParams{Queue: "q", Kind: kind, Args: []byte(`{}`), MaxAttempts: 3}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{job("plain")}}); err != nil {
		t.Fatalf("insert on schema 18: %v", err)
	}
	wf, bt, _ := oldWorkflowAndBatch(t, be, 3)

	db, schema := be.DB(), "`"+be.Database()+"`"
	if _, err := db.ExecContext(ctx, `ALTER TABLE `+schema+`.spool_jobs
  ADD KEY spool_jobs_member (has_dependents, workflow_id, batch_id, id), DROP KEY spool_jobs_batch`); err != nil {
		t.Fatalf("the part of 19 done before the stop: %v", err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 18 to the latest: %v", err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != v.Latest || v.Latest < 19 {
		t.Fatalf("schema version %+v, %v; want the latest", v, err)
	}
	// Schema 20 moved spool_jobs_member's readers to spool_job_keys.
	var keys string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(GROUP_CONCAT(DISTINCT INDEX_NAME ORDER BY INDEX_NAME), '') FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'spool_jobs' AND INDEX_NAME IN ('spool_jobs_member', 'spool_jobs_workflow', 'spool_jobs_batch', 'spool_jobs_unsettled')`,
		be.Database()).Scan(&keys); err != nil || keys != "" {
		t.Fatalf("indexes after the upgrade: %q, %v; want none of them", keys, err)
	}

	d, err := be.WorkflowGet(ctx, wf.ID)
	if err != nil || len(d.Jobs) != 2 || len(d.Edges) != 1 || d.Edges[0].Parent != wf.IDs[0] || d.Edges[0].Child != wf.IDs[1] {
		t.Fatalf("workflow after the upgrade: %+v, %v; want its 2 tasks and their edge", d, err)
	}
	// Pages of 2 over the members, the middle one settled for the read
	// (as its finish would), then back.
	setDeps := func(v int) {
		t.Helper()
		for _, table := range []string{"spool_jobs SET has_dependents = ? WHERE id = ?", "spool_job_keys SET has_dependents = ? WHERE job_id = ?"} {
			if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.`+table, v, bt.IDs[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	pageMembers := func(when string) {
		t.Helper()
		var members []int64
		for after := int64(0); ; {
			page, err := be.BatchMembers(ctx, &backend.BatchMembersParams{ID: bt.ID, AfterID: after, Limit: 2})
			if err != nil {
				t.Fatalf("batch members %s: %v", when, err)
			}
			if len(page) == 0 {
				break
			}
			for _, j := range page {
				members = append(members, j.ID)
				after = j.ID
			}
		}
		if len(members) != 3 || members[0] != bt.IDs[0] || members[1] != bt.IDs[1] || members[2] != bt.IDs[2] {
			t.Fatalf("batch members %s: %v; want %v in id order, without the callback", when, members, bt.IDs)
		}
	}
	pageMembers("after the upgrade")
	setDeps(0)
	pageMembers("one settled")
	setDeps(1)

	// Task a made final by a write outside a finish: the sweep settles b.
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'completed', finalized_at = UTC_TIMESTAMP(6) WHERE id = ?`, wf.IDs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := be.JobRescue(ctx, &backend.JobRescueParams{}); err != nil {
		t.Fatalf("rescue after the upgrade: %v", err)
	}
	if j, err := be.JobGet(ctx, wf.IDs[1]); err != nil || j.State != backend.StateAvailable {
		t.Fatalf("task b after the sweep: %+v, %v; want available", j, err)
	}

	// Claim the plain job, task b and the members; finish them all.
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "upgrade"})
	if err != nil || len(rows) != 5 {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want 5", len(rows), err)
	}
	fs := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		fs[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
	}
	if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish after the upgrade: %+v, %v", res, err)
	}
	if got, err := be.BatchGet(ctx, bt.ID); err != nil || got.Completed != 3 || got.FinishedAt == nil {
		t.Fatalf("batch after its members finished: %+v, %v; want 3 completed, finished", got, err)
	}
	pageMembers("after they finished")
	rows, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "upgrade-2"})
	if err != nil || len(rows) != 1 || rows[0].Kind != "callback" {
		t.Fatalf("claim after the batch finished: %+v, %v; want its callback", rows, err)
	}
	list, err := be.WorkflowList(ctx, &backend.WorkflowListParams{})
	if err != nil || len(list) != 1 || list[0].Counts[backend.StateCompleted] != 2 {
		t.Fatalf("workflow list after the upgrade: %+v, %v; want 2 tasks completed", list, err)
	}
}
