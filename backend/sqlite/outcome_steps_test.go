package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestOutcomesWriteTheirSteps: the step records outcomes carry
// (backend.OutcomeStepWriter) are written, in order and under their
// fence, for the outcomes that apply, a completion's or a retry's; an
// outcome refused writes none; a job deleted at its completion keeps
// none.
func TestOutcomesWriteTheirSteps(t *testing.T) {
	for _, del := range []bool{false, true} {
		be := newBackend(t, nil)
		if !be.WritesOutcomeSteps() {
			t.Fatal("the SQLite backend does not declare OutcomeStepWriter")
		}
		ctx := context.Background()
		jobs := make([]*backend.JobInsertParams, 3)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 3, Lease: time.Minute, ClaimID: "t"})
		if err != nil || len(rows) != 3 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		with := func(l backend.LeaseRef, o backend.Outcome, names ...string) backend.JobFinish {
			f := backend.JobFinish{Lease: l, Outcome: o, Durable: true}
			if o == backend.OutcomeRetry {
				f.Error = &backend.AttemptError{Attempt: 1, Error: "again"}
			}
			for _, n := range names {
				r, _ := json.Marshal(n)
				f.Steps = append(f.Steps, backend.StepRecordParams{Lease: l, Name: n, Result: r})
			}
			return f
		}
		stale := rows[1].Lease()
		stale.Fence++
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{DeleteCompleted: del, Finishes: []backend.JobFinish{
			with(rows[0].Lease(), backend.OutcomeComplete, "a", "b", "c"),
			with(stale, backend.OutcomeComplete, "stale"),
			with(rows[2].Lease(), backend.OutcomeRetry, "r1", "r2"),
		}})
		if err != nil || len(res.Rejected) != 1 || res.Rejected[0] != stale {
			t.Fatalf("finish: %+v, %v, want the stale lease refused", res, err)
		}
		names := func(r *backend.JobRow) []string {
			d, err := be.JobDurable(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, s := range d.Steps {
				var v string
				if err := json.Unmarshal(s.Result, &v); err != nil || v != s.Name || s.Fence != r.Fence {
					t.Fatalf("job %d: step %q recorded %s under fence %d", r.ID, s.Name, s.Result, s.Fence)
				}
				out = append(out, s.Name)
			}
			return out
		}
		want := []string{"a", "b", "c"}
		if del {
			want = nil
			if _, err := be.JobGet(ctx, rows[0].ID); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("job deleted at its completion: get %v", err)
			}
		}
		if got := names(rows[0]); !slices.Equal(got, want) {
			t.Fatalf("delete %v: job completed: steps %v, want %v", del, got, want)
		}
		if got := names(rows[1]); len(got) != 0 {
			t.Fatalf("job whose outcome was refused: steps %v, want none", got)
		}
		if got := names(rows[2]); !slices.Equal(got, []string{"r1", "r2"}) {
			t.Fatalf("job retried: steps %v, want [r1 r2]", got)
		}
	}
}

// TestStepRecordsKeptByteForByte: the records of a batch, written in one
// statement (step_record_many.sql, over JSON), keep their results byte for
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
