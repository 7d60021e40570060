package mysql_test

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
// fence, for the outcomes that apply, a completion's or a retry's, both
// by the batch of plain completions whose leases all hold (one UPDATE)
// and by the long way (a stale lease in the batch); an outcome refused
// writes none; a job deleted at its completion keeps none.
func TestOutcomesWriteTheirSteps(t *testing.T) {
	for _, del := range []bool{false, true} {
		for _, fast := range []bool{false, true} {
			be := newBackend(t, nil)
			if !be.WritesOutcomeSteps() {
				t.Fatal("the MariaDB backend does not declare OutcomeStepWriter")
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
			slices.SortFunc(rows, func(a, b *backend.JobRow) int { return int(a.ID - b.ID) })
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
			finishes := []backend.JobFinish{
				with(rows[0].Lease(), backend.OutcomeComplete, "a", "b", "c", "a"),
				with(stale, backend.OutcomeComplete, "stale"),
				with(rows[2].Lease(), backend.OutcomeRetry, "r1", "r2"),
			}
			wantRejected := 1
			if fast {
				finishes = []backend.JobFinish{
					with(rows[0].Lease(), backend.OutcomeComplete, "a", "b", "c", "a"),
					with(rows[2].Lease(), backend.OutcomeComplete, "r1", "r2"),
				}
				wantRejected = 0
			}
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{DeleteCompleted: del, Finishes: finishes})
			if err != nil || len(res.Rejected) != wantRejected || (!fast && res.Rejected[0] != stale) {
				t.Fatalf("finish: %+v, %v, want %d refused", res, err, wantRejected)
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
				t.Fatalf("delete %v, fast %v: job completed: steps %v, want %v", del, fast, got, want)
			}
			if got := names(rows[1]); len(got) != 0 {
				t.Fatalf("job whose outcome was refused or not given: steps %v, want none", got)
			}
			want = []string{"r1", "r2"}
			if fast && del {
				want = nil
			}
			if got := names(rows[2]); !slices.Equal(got, want) {
				t.Fatalf("delete %v, fast %v: second job: steps %v, want %v", del, fast, got, want)
			}
		}
	}
}

// TestStepRecordManyOneInsert: a batch of records over several jobs, in
// one multi-row INSERT, applies each as it would alone: a stale lease's
// not recorded, a name recorded already or earlier in the batch
// ErrStepRecorded, the others recorded in order; a name the column's
// collation equates with a recorded one ("x" and "x ", PAD SPACE) fails
// the INSERT, and the batch is written one by one with the same answers.
func TestStepRecordManyOneInsert(t *testing.T) {
	be := newBackend(t, nil)
	ctx := context.Background()
	jobs := make([]*backend.JobInsertParams, 2)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 2, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	a, b := rows[0].Lease(), rows[1].Lease()
	stale := a
	stale.Fence++
	rec := func(l backend.LeaseRef, name string) backend.StepRecordParams {
		r, _ := json.Marshal(name)
		return backend.StepRecordParams{Lease: l, Name: name, Result: r}
	}
	if ok, err := be.StepRecord(ctx, &[]backend.StepRecordParams{rec(a, "x")}[0]); !ok || err != nil {
		t.Fatalf("record x: %v %v", ok, err)
	}
	check := func(batch []backend.StepRecordParams, recorded []bool, dup []bool) {
		t.Helper()
		out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: batch})
		if err != nil || len(out) != len(batch) {
			t.Fatalf("batch: %+v %v", out, err)
		}
		for i, r := range out {
			if r.Recorded != recorded[i] || errors.Is(r.Err, backend.ErrStepRecorded) != dup[i] || (!dup[i] && r.Err != nil) {
				t.Fatalf("record %d (%q): %+v, want recorded %v, ErrStepRecorded %v", i, batch[i].Name, r, recorded[i], dup[i])
			}
		}
	}
	check([]backend.StepRecordParams{rec(b, "b1"), rec(stale, "s"), rec(a, "x"), rec(a, "a1"), rec(b, "b1"), rec(b, "b2"), rec(a, "a2")},
		[]bool{true, false, false, true, false, true, true}, []bool{false, false, true, false, true, false, false})
	check([]backend.StepRecordParams{rec(a, "a3"), rec(a, "x "), rec(b, "b3")},
		[]bool{true, false, true}, []bool{false, true, false})
	want := map[int64][]string{a.ID: {"x", "a1", "a2", "a3"}, b.ID: {"b1", "b2", "b3"}}
	for id, names := range want {
		d, err := be.JobDurable(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range d.Steps {
			var v string
			if err := json.Unmarshal(s.Result, &v); err != nil || v != s.Name {
				t.Fatalf("job %d: step %q recorded %s", id, s.Name, s.Result)
			}
			got = append(got, s.Name)
		}
		if !slices.Equal(got, names) {
			t.Fatalf("job %d: steps %v, want %v", id, got, names)
		}
	}
}
