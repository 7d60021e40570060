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

// TestOutcomesWriteTheirSteps: MariaDB declares backend.OutcomeStepWriter,
// so the conformance subject OutcomesWriteTheirSteps runs here (it skips a
// store without it) and covers both of its completion paths: a batch with a
// stale lease (the long way) and one whose leases all hold (one UPDATE).
func TestOutcomesWriteTheirSteps(t *testing.T) {
	if !newBackend(t, nil).WritesOutcomeSteps() {
		t.Fatal("the MariaDB backend does not declare OutcomeStepWriter")
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
