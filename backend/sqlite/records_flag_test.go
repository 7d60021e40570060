package sqlite

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/spoolq/spool/backend"
)

// recordCounts are the rows of job id in each record table: spool_steps,
// spool_step_sets, spool_signals.
func recordCounts(t *testing.T, be *Backend, id int64) [3]int {
	t.Helper()
	return [3]int{
		count(t, be, `SELECT count(*) FROM spool_steps WHERE job_id = ?`, id),
		count(t, be, `SELECT count(*) FROM spool_step_sets WHERE job_id = ?`, id),
		count(t, be, `SELECT count(*) FROM spool_signals WHERE job_id = ?`, id),
	}
}

func hasRecords(t *testing.T, be *Backend, id int64) int {
	t.Helper()
	return count(t, be, `SELECT has_records FROM spool_jobs WHERE id = ?`, id)
}

// TestRecordsFlagDeletes: a job's first step record, step set or signal,
// whoever writes it, flags its row (schema 15), and the delete trigger
// takes the records of a flagged job with it whichever statement deletes
// it (the store's deleting completion, SQL of one's own); a job
// without records stays unflagged.
func TestRecordsFlagDeletes(t *testing.T) {
	ctx := context.Background()
	be := newTestBackend(t)
	rows := claimAll(t, be, 5)
	step, set, sig, plain, byHand := rows[0].Lease(), rows[1].Lease(), rows[2].Lease(), rows[3].Lease(), rows[4].Lease()
	if ok, err := be.StepRecord(ctx, &backend.StepRecordParams{Lease: step, Name: "a", Result: json.RawMessage(`1`)}); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: set, Name: "a", Result: json.RawMessage(`1`)}, {Lease: set, Name: "b", Result: json.RawMessage(`2`)},
	}})
	if err != nil || !out[0].Recorded || !out[1].Recorded {
		t.Fatalf("set: %+v %v", out, err)
	}
	// The job's next set finds its row flagged and says so, which keeps
	// the flag's trigger from running again.
	out, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: set, Name: "c", Result: json.RawMessage(`3`)},
	}})
	if err != nil || !out[0].Recorded {
		t.Fatalf("second set: %+v %v", out, err)
	}
	if first, next := count(t, be, `SELECT job_flagged FROM spool_step_sets WHERE job_id = ? AND name = 'a'`, set.ID),
		count(t, be, `SELECT job_flagged FROM spool_step_sets WHERE job_id = ? AND name = 'c'`, set.ID); first != 0 || next != 1 {
		t.Fatalf("job_flagged of the first and the next set: %d, %d", first, next)
	}
	if _, err := be.JobSignal(ctx, &backend.JobSignalParams{JobID: sig.ID, Name: "go", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// A record written by SQL of one's own flags its job too.
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_signals (job_id, name, payload, created_at) VALUES (?, 'x', '{}', 1)`, byHand.ID); err != nil {
		t.Fatal(err)
	}
	for _, l := range []backend.LeaseRef{step, set, sig, byHand} {
		if f := hasRecords(t, be, l.ID); f != 1 {
			t.Fatalf("job %d with records: has_records %d", l.ID, f)
		}
	}
	if f := hasRecords(t, be, plain.ID); f != 0 {
		t.Fatalf("job without records: has_records %d", f)
	}
	// Deleted at their completion or by SQL: no record left.
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{DeleteCompleted: true, Finishes: []backend.JobFinish{
		{Lease: step, Outcome: backend.OutcomeComplete}, {Lease: set, Outcome: backend.OutcomeComplete}, {Lease: plain, Outcome: backend.OutcomeComplete},
	}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %+v %v", res, err)
	}
	if _, err := be.DB().ExecContext(ctx, `DELETE FROM spool_jobs WHERE id IN (?, ?)`, sig.ID, byHand.ID); err != nil {
		t.Fatal(err)
	}
	for _, l := range rows {
		if n := recordCounts(t, be, l.ID); n != [3]int{} {
			t.Fatalf("job %d deleted left records %v", l.ID, n)
		}
	}
}

// TestRecordsFlagUpgrade: a file at schema 14 whose jobs have records of
// each kind flags those jobs, and only those, when it moves to schema 15,
// and their records still go with them.
func TestRecordsFlagUpgrade(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 14)
	rows := claimAll(t, be, 4)
	ids := []int64{rows[0].ID, rows[1].ID, rows[2].ID, rows[3].ID}
	for _, q := range []string{
		`INSERT INTO spool_steps (job_id, name, result, fence, created_at) VALUES (?, 'a', '1', 1, 1)`,
		`INSERT INTO spool_step_sets (job_id, name, names, results, fence, created_at) VALUES (?, 'a', '["a"]', '["1"]', 1, 1)`,
		`INSERT INTO spool_signals (job_id, name, payload, created_at) VALUES (?, 'a', '{}', 1)`,
	} {
		if _, err := be.DB().ExecContext(ctx, q, ids[0]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_step_sets (job_id, name, names, results, fence, created_at) VALUES (?, 'a', '["a"]', '["1"]', 1, 1)`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_signals (job_id, name, payload, created_at) VALUES (?, 'a', '{}', 1)`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 1, 1, 0} {
		if f := hasRecords(t, be, ids[i]); f != want {
			t.Fatalf("job %d after the upgrade: has_records %d, want %d", ids[i], f, want)
		}
	}
	if _, err := be.DB().ExecContext(ctx, `DELETE FROM spool_jobs`); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if n := recordCounts(t, be, id); n != [3]int{} {
			t.Fatalf("job %d deleted left records %v", id, n)
		}
	}
}
