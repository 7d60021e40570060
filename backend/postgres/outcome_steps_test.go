package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// withSteps is a finish of lease carrying step records named names, each
// recording its name as its result.
func withSteps(lease backend.LeaseRef, outcome backend.Outcome, names ...string) backend.JobFinish {
	f := backend.JobFinish{Lease: lease, Outcome: outcome, Durable: true}
	for _, n := range names {
		r, _ := json.Marshal(n)
		f.Steps = append(f.Steps, backend.StepRecordParams{Lease: lease, Name: n, Result: r})
	}
	if outcome == backend.OutcomeRetry {
		f.Error = &backend.AttemptError{Attempt: 1, Error: "again"}
	}
	return f
}

// stepsOf returns the names and results of job id's records, checking
// each was recorded under fence.
func stepsOf(t *testing.T, be backend.StepStore, id int64, fence int32) []string {
	t.Helper()
	d, err := be.JobDurable(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range d.Steps {
		var v string
		if err := json.Unmarshal(s.Result, &v); err != nil || v != s.Name || s.Fence != fence {
			t.Fatalf("job %d: step %q recorded %s under fence %d (%v), want its name under fence %d", id, s.Name, s.Result, s.Fence, err, fence)
		}
		names = append(names, s.Name)
	}
	return names
}

// TestOutcomesWriteTheirSteps: the step records outcomes carry
// (backend.OutcomeStepWriter) are written for the outcomes that apply,
// in order, under their fence, whether the job is completed from a lease
// row (in the completion's statement) or in place, or given another
// outcome; an outcome refused writes none, a second write of an applied
// outcome changes nothing, and a job deleted at its completion keeps none.
func TestOutcomesWriteTheirSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	if !be.WritesOutcomeSteps() {
		t.Fatal("the PostgreSQL backend does not declare OutcomeStepWriter")
	}
	ids, rows := claimThreeLeasedOneInPlace(t, be)
	var leased []*backend.JobRow
	var inPlace *backend.JobRow
	for _, r := range rows {
		if r.ID == ids[3] {
			inPlace = r
		} else {
			leased = append(leased, r)
		}
	}
	stale := leased[1].Lease()
	stale.Fence++
	// Names that need quoting in an array literal, and results past the
	// 64 KiB that start a new set.
	odd := []string{`a"q`, `b\s`, `c,{}`, ` d `, "NULL", "é"}
	big := withSteps(leased[2].Lease(), backend.OutcomeComplete, "big1", "big2", "big3")
	for i := range big.Steps {
		big.Steps[i].Result = json.RawMessage(`"` + strings.Repeat("x", 40000) + `"`)
	}
	finishes := []backend.JobFinish{
		withSteps(leased[0].Lease(), backend.OutcomeComplete, odd...),
		withSteps(stale, backend.OutcomeComplete, "stale"),
		big,
		withSteps(inPlace.Lease(), backend.OutcomeComplete, "x", "y"),
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) != 1 || res.Rejected[0] != stale {
		t.Fatalf("rejected %v, want only the stale lease %v", res.Rejected, stale)
	}
	check := func() {
		t.Helper()
		if got := stepsOf(t, be, leased[0].ID, leased[0].Fence); !slices.Equal(got, odd) {
			t.Fatalf("job completed from its lease row: steps %q, want %q", got, odd)
		}
		d, err := be.JobDurable(ctx, leased[2].ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, st := range d.Steps {
			names = append(names, st.Name)
			if string(st.Result) != string(big.Steps[0].Result) {
				t.Fatalf("job of large results: step %q recorded %d bytes", st.Name, len(st.Result))
			}
		}
		if !slices.Equal(names, []string{"big1", "big2", "big3"}) {
			t.Fatalf("job of large results: steps %v, want [big1 big2 big3]", names)
		}
		var sets int
		if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_step_sets WHERE job_id = $1`, leased[2].ID).Scan(&sets); err != nil || sets != 2 {
			t.Fatalf("job of 120,000 bytes of results: %d sets (%v), want 2", sets, err)
		}
		if got := stepsOf(t, be, leased[1].ID, leased[1].Fence); len(got) != 0 {
			t.Fatalf("job whose outcome was refused: steps %v, want none", got)
		}
		if got := stepsOf(t, be, inPlace.ID, inPlace.Fence); !slices.Equal(got, []string{"x", "y"}) {
			t.Fatalf("job completed in place: steps %v, want [x y]", got)
		}
	}
	check()
	for _, id := range []int64{leased[0].ID, leased[2].ID, inPlace.ID} {
		if j, err := be.JobGet(ctx, id); err != nil || j.State != backend.StateCompleted {
			t.Fatalf("job %d: %+v, %v, want completed", id, j, err)
		}
	}
	// The same outcomes again, as after a reply lost: refused, no record
	// written twice.
	res, err = be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
	if err != nil || len(res.Rejected) != len(finishes) {
		t.Fatalf("the outcomes written again: %+v, %v, want all refused", res, err)
	}
	check()

	// Other outcomes: a retry's records are there for its next attempt.
	insertJobs(t, be, plainJob(), plainJob())
	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 10, Lease: time.Minute, ClaimID: "c#2"})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d rows, %v", len(claimed), err)
	}
	res, err = be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
		withSteps(claimed[0].Lease(), backend.OutcomeRetry, "r1", "r2"),
		withSteps(claimed[1].Lease(), backend.OutcomeComplete, "k1"),
	}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("a retry and a completion: %+v, %v", res, err)
	}
	if got := stepsOf(t, be, claimed[0].ID, claimed[0].Fence); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("job retried: steps %v, want [r1 r2]", got)
	}
	if got := stepsOf(t, be, claimed[1].ID, claimed[1].Fence); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("job completed beside a retry: steps %v, want [k1]", got)
	}

	// Deleted at its completion: no records left.
	insertJobs(t, be, plainJob())
	claimed, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: 1, Lease: time.Minute, ClaimID: "c#3"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d rows, %v", len(claimed), err)
	}
	res, err = be.JobFinishMany(ctx, &backend.JobFinishManyParams{DeleteCompleted: true,
		Finishes: []backend.JobFinish{withSteps(claimed[0].Lease(), backend.OutcomeComplete, "gone")}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("a completion deleted: %+v, %v", res, err)
	}
	if _, err := be.JobGet(ctx, claimed[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("job deleted at its completion: get %v, want not found", err)
	}
	if got := stepsOf(t, be, claimed[0].ID, claimed[0].Fence); len(got) != 0 {
		t.Fatalf("job deleted at its completion: steps %v, want none", got)
	}
}
