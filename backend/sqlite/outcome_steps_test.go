package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestStepRecordsKeptByteForByte: the records of a batch, written as a
// set per job (step_sets.sql, results as JSON strings), keep their results byte for
// byte (spacing, characters JSON escapes), in order; a name twice in one
// batch is written once, the second reported ErrStepRecorded; a record not
// valid UTF-8 (which JSON would not carry) is written unchanged too, one by
// one, through an outcome and through StepRecordMany.
func TestStepRecordsKeptByteForByte(t *testing.T) {
	be := newBackend(t, nil)
	ctx := context.Background()
	jobs := []*backend.JobInsertParams{
		{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5},
		{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5},
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 2, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	results := []string{`{ "a" : 1,  "b": "<&>\u00e9" }`, `[1, 2 ,3]`, `"\"quoted\" \\ é"`, "\"bad \xff byte\""}
	for n, r := range rows {
		l := r.Lease()
		var recs []backend.StepRecordParams
		for i, res := range results[:3+n] { // the second job's batch holds the record not valid UTF-8
			recs = append(recs, backend.StepRecordParams{Lease: l, Name: "s" + string(rune('a'+i)), Result: json.RawMessage(res)})
		}
		if n == 0 {
			many, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: append(recs,
				backend.StepRecordParams{Lease: l, Name: "sa", Result: json.RawMessage(`"again"`)})})
			if err != nil || len(many) != 4 || !many[0].Recorded || !many[1].Recorded || !many[2].Recorded ||
				many[3].Recorded || !errors.Is(many[3].Err, backend.ErrStepRecorded) {
				t.Fatalf("batch with a name twice: %+v %v", many, err)
			}
			if _, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: l, Outcome: backend.OutcomeComplete}}}); err != nil {
				t.Fatal(err)
			}
		} else {
			recs = append(recs, backend.StepRecordParams{Lease: l, Name: "sa", Result: json.RawMessage(`"again"`)})
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: l, Outcome: backend.OutcomeComplete, Steps: recs}}})
			if err != nil || len(res.Rejected) != 0 {
				t.Fatalf("finish: %+v %v", res, err)
			}
		}
		d, err := be.JobDurable(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Steps) != 3+n {
			t.Fatalf("job %d: %d steps, want %d", n, len(d.Steps), 3+n)
		}
		for i, s := range d.Steps {
			if s.Name != "s"+string(rune('a'+i)) || string(s.Result) != results[i] || s.Fence != r.Fence {
				t.Fatalf("job %d: step %d %q = %q (fence %d), want %q", n, i, s.Name, s.Result, s.Fence, results[i])
			}
		}
	}
	// The same batch again, the second job's lease gone: nothing written,
	// nothing reported recorded.
	many, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: rows[1].Lease(), Name: "late", Result: json.RawMessage(`1`)},
	}})
	if err != nil || len(many) != 1 || many[0].Recorded || many[0].Err != nil {
		t.Fatalf("record of a finished job: %+v %v", many, err)
	}
}
