package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/spoolq/spool/backend"
)

// TestRecordsFlag: a record of each kind (a step row, a step set, a signal)
// marks its job, whoever writes it, and the job's delete takes its records
// with it; a job without records stays unmarked, so its delete runs no
// search of the records' tables (schema 15).
func TestRecordsFlag(t *testing.T) {
	ctx := context.Background()
	be := newTestBackend(t)
	rows := claimAll(t, be, 4)
	step, set, signal, none := rows[0].Lease(), rows[1].Lease(), rows[2].Lease(), rows[3].Lease()
	if ok, err := be.StepRecord(ctx, &backend.StepRecordParams{Lease: step, Name: "a", Result: json.RawMessage(`1`)}); err != nil || !ok {
		t.Fatalf("step record: %v %v", ok, err)
	}
	out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: set, Name: "a", Result: json.RawMessage(`1`)}, {Lease: set, Name: "b", Result: json.RawMessage(`2`)},
	}})
	if err != nil || !out[0].Recorded || !out[1].Recorded {
		t.Fatalf("step set: %+v %v", out, err)
	}
	if _, err := be.JobSignal(ctx, &backend.JobSignalParams{JobID: signal.ID, Name: "go", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatalf("signal: %v", err)
	}
	records := func(id int64) int {
		return count(t, be, `SELECT (SELECT count(*) FROM spool_steps WHERE job_id = ?1) + (SELECT count(*) FROM spool_step_sets WHERE job_id = ?1) + (SELECT count(*) FROM spool_signals WHERE job_id = ?1)`, id)
	}
	for _, c := range []struct {
		name    string
		id      int64
		flag    int
		records int
	}{{"step row", step.ID, 1, 1}, {"step set", set.ID, 1, 1}, {"signal", signal.ID, 1, 1}, {"no record", none.ID, 0, 0}} {
		if got := count(t, be, `SELECT has_records FROM spool_jobs WHERE id = ?`, c.id); got != c.flag {
			t.Errorf("%s: has_records %d, want %d", c.name, got, c.flag)
		}
		if got := records(c.id); got != c.records {
			t.Errorf("%s: %d records before the delete, want %d", c.name, got, c.records)
		}
	}
	// A record written by SQL of its own (an older client's statement) marks
	// its job too: the mark is the table's trigger, not the backend's.
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_steps (job_id, name, result, fence, created_at) VALUES (?, 'raw', '1', ?, 1)`, none.ID, none.Fence); err != nil {
		t.Fatal(err)
	}
	if got := count(t, be, `SELECT has_records FROM spool_jobs WHERE id = ?`, none.ID); got != 1 {
		t.Errorf("a raw step row left its job unmarked")
	}
	// Completed and deleted, as a drain that keeps no completed rows does.
	if err := completeDeleting(ctx, be, step, set, signal, none); err != nil {
		t.Fatal(err)
	}
	for _, l := range []backend.LeaseRef{step, set, signal, none} {
		if got := records(l.ID); got != 0 {
			t.Errorf("job %d deleted with %d records left", l.ID, got)
		}
	}
}

// TestRecordsFlagAfterUpgrade: jobs with records written before schema 15
// are marked by the migration, so their delete still takes the records.
func TestRecordsFlagAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 14)
	rows := claimAll(t, be, 2)
	with, without := rows[0].Lease(), rows[1].Lease()
	for _, q := range []string{
		`INSERT INTO spool_steps (job_id, name, result, fence, created_at) VALUES (?1, 'a', '1', 1, 1)`,
		`INSERT INTO spool_step_sets (job_id, name, names, results, fence, created_at) VALUES (?1, 'b', '["b"]', '["2"]', 1, 1)`,
		`INSERT INTO spool_signals (job_id, name, payload, created_at) VALUES (?1, 'go', '1', 1)`,
	} {
		if _, err := be.DB().ExecContext(ctx, q, with.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, be, `SELECT has_records FROM spool_jobs WHERE id = ?`, with.ID); got != 1 {
		t.Fatalf("a job with records before the upgrade: has_records %d", got)
	}
	if got := count(t, be, `SELECT has_records FROM spool_jobs WHERE id = ?`, without.ID); got != 0 {
		t.Fatalf("a job without records: has_records %d", got)
	}
	if err := completeDeleting(ctx, be, with); err != nil {
		t.Fatal(err)
	}
	if got := count(t, be, `SELECT (SELECT count(*) FROM spool_steps) + (SELECT count(*) FROM spool_step_sets) + (SELECT count(*) FROM spool_signals)`); got != 0 {
		t.Fatalf("%d records left after their job's delete", got)
	}
}

// completeDeleting completes the leases' jobs, deleting them.
func completeDeleting(ctx context.Context, be *Backend, leases ...backend.LeaseRef) error {
	fs := make([]backend.JobFinish, len(leases))
	for i, l := range leases {
		fs[i] = backend.JobFinish{Lease: l, Outcome: backend.OutcomeComplete}
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: true})
	if err == nil && len(res.Rejected) > 0 {
		err = fmt.Errorf("completions rejected: %v", res.Rejected)
	}
	return err
}
