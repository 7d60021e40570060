package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// TestStepSets checks the records of schema 25: a batch writes one set per
// job (a new one past 64 KiB of results), reads give the steps back in
// their order, and a name is recorded once per job whether it is a set's
// key, inside a set, or a spool_steps row of an older client.
func TestStepSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	_, rows := claimThreeLeasedOneInPlace(t, be)
	a, b, c := rows[0].Lease(), rows[1].Lease(), rows[2].Lease()
	step := func(l backend.LeaseRef, name, result string) backend.StepRecordParams {
		return backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(result)}
	}
	big := fmt.Sprintf("%q", strings.Repeat("x", 70<<10))
	batch := []backend.StepRecordParams{
		step(a, "z", `1`), step(b, "small1", `"s1"`), step(a, "m", `2`), step(b, "big", big),
		step(a, "a", `3`), step(b, "small2", `"s2"`),
	}
	res, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: batch})
	if err != nil || len(res) != len(batch) {
		t.Fatalf("batch: %+v %v", res, err)
	}
	for i, r := range res {
		if !r.Recorded || r.Err != nil {
			t.Fatalf("record %d (%s of job %d): %+v, want recorded", i, batch[i].Name, batch[i].Lease.ID, r)
		}
	}
	if n := stepSets(t, be, a.ID); n != 1 {
		t.Fatalf("job %d: %d sets, want its batch's records in one", a.ID, n)
	}
	if n := stepSets(t, be, b.ID); n != 2 {
		t.Fatalf("job %d: %d sets, want a second one past 64 KiB of results", b.ID, n)
	}
	wantSteps(t, be, a.ID, "z=1", "m=2", "a=3")
	wantSteps(t, be, b.ID, `small1="s1"`, "big="+big, `small2="s2"`)

	// An older client's record of c, then names already recorded in each
	// place: a set's key, a name inside a set, the older client's row.
	if _, err := be.Pool().Exec(ctx, `INSERT INTO `+be.Schema()+`.spool_steps (job_id, name, result, fence) VALUES ($1, 'old', '0', $2)`, c.ID, c.Fence); err != nil {
		t.Fatal(err)
	}
	res, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		step(a, "z", `9`), step(a, "m", `9`), step(c, "old", `9`), step(c, "new", `4`), step(a, "b", `5`),
	}})
	if err != nil || len(res) != 5 {
		t.Fatalf("second batch: %+v %v", res, err)
	}
	for i, want := range []bool{false, false, false, true, true} {
		if res[i].Recorded != want || want != (res[i].Err == nil) || (!want && !errors.Is(res[i].Err, backend.ErrStepRecorded)) {
			t.Fatalf("second batch, record %d: %+v, want recorded %v (else ErrStepRecorded)", i, res[i], want)
		}
	}
	for _, p := range []backend.StepRecordParams{step(a, "m", `9`), step(c, "old", `9`), step(a, "b", `9`)} {
		if ok, err := be.StepRecord(ctx, &p); ok || !errors.Is(err, backend.ErrStepRecorded) {
			t.Fatalf("StepRecord of %s, recorded already: %v %v, want ErrStepRecorded", p.Name, ok, err)
		}
	}
	p := step(c, "alone", `6`)
	if ok, err := be.StepRecord(ctx, &p); !ok || err != nil {
		t.Fatalf("StepRecord of a new name: %v %v", ok, err)
	}
	wantSteps(t, be, a.ID, "z=1", "m=2", "a=3", "b=5")
	wantSteps(t, be, c.ID, "old=0", "new=4", "alone=6")
}

// stepSets counts the spool_step_sets rows of job id.
func stepSets(t *testing.T, be *postgres.Backend, id int64) int {
	t.Helper()
	var n int
	if err := be.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+be.Schema()+`.spool_step_sets WHERE job_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantSteps checks the steps JobDurable returns for job id, as name=result
// in order.
func wantSteps(t *testing.T, be *postgres.Backend, id int64, want ...string) {
	t.Helper()
	d, err := be.JobDurable(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range d.Steps {
		got = append(got, s.Name+"="+strings.ReplaceAll(string(s.Result), " ", ""))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("steps of job %d: %.200q, want %.200q", id, got, want)
	}
}

// TestStepsRecordedInLeaseRows checks that a batch of records leaves jobs
// held in lease rows where they are: the records are written under each
// job's lease row's fence, a stale fence records nothing, a name is
// recorded once, readers find the records, and a completion that deletes
// the jobs takes their records with it.
func TestStepsRecordedInLeaseRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	const n = 100
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = plainJob()
	}
	insertJobs(t, be, jobs...)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "lr", Max: n, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != n || inPlace != 0 {
		t.Fatalf("claimed: %d jobs in lease rows and %d in place, want %d and 0", leased, inPlace, n)
	}
	step := func(l backend.LeaseRef, name, result string) backend.StepRecordParams {
		return backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(result)}
	}
	var batch []backend.StepRecordParams
	for _, r := range rows {
		batch = append(batch, step(r.Lease(), "a", `1`), step(r.Lease(), "b", fmt.Sprint(r.ID)))
	}
	stale := rows[0].Lease()
	stale.Fence--
	batch = append(batch, step(stale, "c", `0`))
	res, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: batch})
	if err != nil || len(res) != len(batch) {
		t.Fatalf("batch: %d results, %v", len(res), err)
	}
	for i, r := range res[:len(res)-1] {
		if !r.Recorded || r.Err != nil {
			t.Fatalf("record %d (%s of job %d): %+v, want recorded", i, batch[i].Name, batch[i].Lease.ID, r)
		}
	}
	if r := res[len(res)-1]; r.Recorded || r.Err != nil {
		t.Fatalf("record under a stale fence: %+v, want refused", r)
	}
	if leased, inPlace := leaseRowsState(t, be); leased != n || inPlace != 0 {
		t.Fatalf("after the records: %d jobs in lease rows and %d in place, want %d and 0", leased, inPlace, n)
	}
	wantSteps(t, be, rows[7].ID, "a=1", fmt.Sprintf("b=%d", rows[7].ID))

	// A name recorded already, in the lease row's job: refused; a new one
	// recorded.
	res, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		step(rows[3].Lease(), "b", `9`), step(rows[3].Lease(), "d", `4`),
	}})
	if err != nil || len(res) != 2 || res[0].Recorded || !errors.Is(res[0].Err, backend.ErrStepRecorded) || !res[1].Recorded {
		t.Fatalf("second batch: %+v %v, want ErrStepRecorded then recorded", res, err)
	}
	wantSteps(t, be, rows[3].ID, "a=1", fmt.Sprintf("b=%d", rows[3].ID), "d=4")

	// Completed and deleted, with their records.
	var fs []backend.JobFinish
	for _, r := range rows {
		fs = append(fs, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete, Durable: true})
	}
	fres, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: true})
	if err != nil || len(fres.Rejected) != 0 {
		t.Fatalf("finish: %+v %v", fres, err)
	}
	for _, r := range rows[:3] {
		if k := stepSets(t, be, r.ID); k != 0 {
			t.Fatalf("job %d deleted at its completion: %d sets left", r.ID, k)
		}
	}
	// A record after the job ended: refused.
	res, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{step(rows[5].Lease(), "e", `5`)}})
	if err != nil || len(res) != 1 || res[0].Recorded || res[0].Err != nil {
		t.Fatalf("record after the completion: %+v %v, want refused", res, err)
	}
}
