package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// oldWorkflowAndBatch writes, on a schema before 20, a workflow of two
// tasks (b depends on a, and waits) and a sealed batch of members jobs and
// an on-complete callback, with the statements of the versions before 20
// (the backend's own now write spool_job_keys too). It returns them as
// WorkflowInsert and BatchInsert would, and the callback's id.
func oldWorkflowAndBatch(t *testing.T, be *mysql.Backend, members int) (*backend.WorkflowInsertResult, *backend.BatchInsertResult, int64) {
	t.Helper()
	ctx := context.Background()
	jobs := []*backend.JobInsertParams{}
	for _, kind := range append([]string{"task_a", "task_b", "callback"}, make([]string, members)...) {
		if kind == "" {
			kind = "member"
		}
		jobs = append(jobs, &backend.JobInsertParams{Queue: "q", Kind: kind, Args: []byte(`{}`), MaxAttempts: 3})
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("insert the workflow's and the batch's jobs: %v", err)
	}
	ids := res.IDs
	db, schema := be.DB(), "`"+be.Database()+"`"
	exec := func(q string, args ...any) int64 {
		t.Helper()
		r, err := db.ExecContext(ctx, strings.ReplaceAll(q, "{{db}}", schema), args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		id, _ := r.LastInsertId()
		return id
	}
	wf := &backend.WorkflowInsertResult{IDs: ids[:2]}
	wf.ID = exec(`INSERT INTO {{db}}.spool_workflows (name, created_at, tasks) VALUES ('wf', UTC_TIMESTAMP(6), 2)`)
	exec(`UPDATE {{db}}.spool_jobs SET workflow_id = ?, workflow_task = 'a', deps_left = 0, has_dependents = 1 WHERE id = ?`, wf.ID, ids[0])
	exec(`UPDATE {{db}}.spool_jobs SET workflow_id = ?, workflow_task = 'b', deps_left = 1, has_dependents = 0,
  state = 'waiting', wait_kind = 'deps' WHERE id = ?`, wf.ID, ids[1])
	exec(`INSERT INTO {{db}}.spool_deps (parent_id, child_id, on_fail) VALUES (?, ?, 0)`, ids[0], ids[1])
	bt := &backend.BatchInsertResult{IDs: ids[3:]}
	bt.ID = exec(`INSERT INTO {{db}}.spool_batches (name, created_at, sealed, total, on_complete) VALUES ('bt', UTC_TIMESTAMP(6), 1, ?, ?)`, members, ids[2])
	exec(`UPDATE {{db}}.spool_jobs SET batch_id = ?, state = 'waiting', wait_kind = 'deps', deps_left = 1 WHERE id = ?`, bt.ID, ids[2])
	for _, m := range bt.IDs {
		exec(`UPDATE {{db}}.spool_jobs SET batch_id = ?, has_dependents = 1 WHERE id = ?`, bt.ID, m)
	}
	return wf, bt, ids[2]
}

// TestUpgradeJobKeys migrates a database holding a plain job, a workflow
// (a task with a dependent, and its dependent waiting) and a sealed batch
// (two members and a callback), written as schema 19's statements wrote
// them, from schema 19 to 20, then runs 20 again
// over its own result (as after a failure part way), and checks that
// spool_jobs lost spool_jobs_member and that spool_job_keys holds a row
// for each workflow task and batch job, none for a plain job, written by
// the inserts and settles after the upgrade and deleted with its job.
func TestUpgradeJobKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if err := be.MigrateTo(ctx, 19); err != nil {
		t.Fatalf("migrate to 19: %v", err)
	}
	job := func(kind string) *backend.JobInsertParams {
		return &backend.JobInsertParams{Queue: "q", Kind: kind, Args: []byte(`{}`), MaxAttempts: 3}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{job("plain")}}); err != nil {
		t.Fatalf("insert on schema 19: %v", err)
	}
	wf, bt, cb := oldWorkflowAndBatch(t, be, 2)

	db, schema := be.DB(), "`"+be.Database()+"`"
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 19 to the latest: %v", err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM `+schema+`.spool_migrations WHERE version = 20`); err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 20 again: %v", err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != v.Latest || v.Latest < 20 {
		t.Fatalf("schema version %+v, %v; want the latest", v, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'spool_jobs' AND INDEX_NAME = 'spool_jobs_member'`, be.Database()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("spool_jobs_member after the upgrade: %d columns, %v; want none", n, err)
	}
	// keys lists spool_job_keys as job:has_dependents:workflow:batch.
	keys := func() string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(GROUP_CONCAT(CONCAT_WS(':', job_id, has_dependents, COALESCE(workflow_id, 0), COALESCE(batch_id, 0))
  ORDER BY job_id SEPARATOR ' '), '') FROM `+schema+`.spool_job_keys`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	row := func(id int64, hd int, w, b int64) string {
		return fmt.Sprintf("%d:%d:%d:%d", id, hd, w, b)
	}
	want := row(wf.IDs[0], 1, wf.ID, 0) + " " + row(wf.IDs[1], 0, wf.ID, 0) + " " +
		row(cb, 0, 0, bt.ID) + " " + row(bt.IDs[0], 1, 0, bt.ID) + " " + row(bt.IDs[1], 1, 0, bt.ID)
	if got := keys(); got != want {
		t.Fatalf("spool_job_keys after the upgrade:\n%s\nwant\n%s", got, want)
	}

	// Inserted after the upgrade: a plain job adds no row, a workflow and
	// a batch add theirs.
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{job("plain")}}); err != nil {
		t.Fatal(err)
	}
	wf2, err := be.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "wf2", Tasks: []backend.WorkflowTaskParams{
		{Name: "a", Job: job("task_a")},
		{Name: "b", Job: job("task_b"), Deps: []backend.WorkflowDep{{Task: 0}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want += " " + row(wf2.IDs[0], 1, wf2.ID, 0) + " " + row(wf2.IDs[1], 0, wf2.ID, 0)
	if got := keys(); got != want {
		t.Fatalf("spool_job_keys after the inserts:\n%s\nwant\n%s", got, want)
	}

	// Claim and complete everything claimable until nothing is left: the
	// settles clear has_dependents in both tables, the callback runs.
	for round := 0; ; round++ {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 100, Lease: time.Minute, ClaimID: "keys"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		if round == 5 {
			t.Fatalf("still claiming after %d rounds", round)
		}
		fs := make([]backend.JobFinish, len(rows))
		for i, r := range rows {
			fs[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
		}
		if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish: %+v, %v", res, err)
		}
	}
	if got, err := be.BatchGet(ctx, bt.ID); err != nil || got.Completed != 2 || got.FinishedAt == nil {
		t.Fatalf("batch: %+v, %v; want 2 completed, finished", got, err)
	}
	var unsettled int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+schema+`.spool_job_keys WHERE has_dependents <> 0`).Scan(&unsettled); err != nil || unsettled != 0 {
		t.Fatalf("side rows with dependents after every job finished: %d, %v; want 0", unsettled, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+schema+`.spool_jobs WHERE has_dependents <> 0`).Scan(&unsettled); err != nil || unsettled != 0 {
		t.Fatalf("jobs with dependents after every job finished: %d, %v; want 0", unsettled, err)
	}

	// Retention deletes the finished jobs, and the foreign key their side
	// rows; the workflows and the batch go with their last job.
	if _, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+schema+`.spool_jobs`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("jobs after the cleanup: %d, %v; want none", n, err)
	}
	if got := keys(); got != "" {
		t.Fatalf("spool_job_keys after the cleanup: %s; want empty", got)
	}
	if _, err := be.BatchGet(ctx, bt.ID); err == nil {
		t.Fatalf("batch %d after the cleanup: still there", bt.ID)
	}
}
