package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// newTestBackend opens a migrated backend on a fresh file.
func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	be := openAtVersion(t, 0)
	if err := be.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return be
}

// claimAll inserts n jobs in be and claims them.
func claimAll(t *testing.T, be *Backend, n int) []*backend.JobRow {
	t.Helper()
	ctx := context.Background()
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: n, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	return rows
}

// stepNames are the names of job id's steps, in the order JobDurable
// lists them.
func stepNames(t *testing.T, be *Backend, id int64) []string {
	t.Helper()
	d, err := be.JobDurable(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range d.Steps {
		out = append(out, s.Name)
	}
	return out
}

// count is the result of a one-value query.
func count(t *testing.T, be *Backend, q string, args ...any) int {
	t.Helper()
	var n int
	if err := be.DB().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStepSetsNamesOncePerJob: a batch's records of a job are one row of
// spool_step_sets, and a name is recorded once per job across its sets
// and its spool_steps rows, whichever way it comes (a batch, an outcome,
// one record): a set holding a recorded name has its other records
// written one by one, the recorded one reported ErrStepRecorded; a lease
// that no longer holds records nothing; the records read back in the
// order written, with their results.
func TestStepSetsNamesOncePerJob(t *testing.T) {
	ctx := context.Background()
	be := newTestBackend(t)
	rows := claimAll(t, be, 3)
	a, b, c := rows[0].Lease(), rows[1].Lease(), rows[2].Lease()
	rec := func(l backend.LeaseRef, name string) backend.StepRecordParams {
		return backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(`"` + name + `"`)}
	}
	// One record alone: a spool_steps row.
	if ok, err := be.StepRecord(ctx, &backend.StepRecordParams{Lease: a, Name: "one", Result: json.RawMessage(`1`)}); !ok || err != nil {
		t.Fatalf("record one: %v %v", ok, err)
	}
	// A batch interleaving two jobs' records: a set each.
	out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		rec(b, "x"), rec(a, "p"), rec(b, "y"), rec(a, "q"),
	}})
	if err != nil || len(out) != 4 || slices.ContainsFunc(out, func(r backend.StepRecordResult) bool { return !r.Recorded || r.Err != nil }) {
		t.Fatalf("batch: %+v %v", out, err)
	}
	if n := count(t, be, `SELECT count(*) FROM spool_step_sets`); n != 2 {
		t.Fatalf("%d sets, want 2", n)
	}
	// Names of a set, of a row, and new ones in one batch: the new ones
	// are written, the recorded ones refused.
	out, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		rec(a, "r"), rec(a, "q"), rec(a, "one"), rec(a, "s"), rec(b, "z"),
	}})
	if err != nil || len(out) != 5 {
		t.Fatalf("batch with recorded names: %+v %v", out, err)
	}
	for i, want := range []bool{true, false, false, true, true} {
		if out[i].Recorded != want || (!want && !errors.Is(out[i].Err, backend.ErrStepRecorded)) || (want && out[i].Err != nil) {
			t.Fatalf("record %d: %+v, want recorded %v", i, out[i], want)
		}
	}
	// One record whose name is in a set.
	if ok, err := be.StepRecord(ctx, &backend.StepRecordParams{Lease: b, Name: "y", Result: json.RawMessage(`2`)}); ok || !errors.Is(err, backend.ErrStepRecorded) {
		t.Fatalf("record of a set's name: %v %v", ok, err)
	}
	if got, want := stepNames(t, be, a.ID), []string{"one", "p", "q", "r", "s"}; !slices.Equal(got, want) {
		t.Fatalf("job a's steps %q, want %q", got, want)
	}
	if got, want := stepNames(t, be, b.ID), []string{"x", "y", "z"}; !slices.Equal(got, want) {
		t.Fatalf("job b's steps %q, want %q", got, want)
	}
	d, err := be.JobDurable(ctx, a.ID)
	if err != nil || string(d.Steps[2].Result) != `"q"` || d.Steps[2].Fence != a.Fence {
		t.Fatalf("job a's step q: %+v %v", d.Steps, err)
	}
	// An outcome carrying a recorded name and new ones: the new ones are
	// written with it, the outcome applies.
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
		{Lease: c, Outcome: backend.OutcomeComplete, Steps: []backend.StepRecordParams{rec(c, "m")}},
		{Lease: b, Outcome: backend.OutcomeComplete, Steps: []backend.StepRecordParams{rec(b, "w"), rec(b, "x"), rec(b, "v")}},
	}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %+v %v", res, err)
	}
	if got, want := stepNames(t, be, b.ID), []string{"x", "y", "z", "w", "v"}; !slices.Equal(got, want) {
		t.Fatalf("job b's steps after its outcome %q, want %q", got, want)
	}
	if got := stepNames(t, be, c.ID); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("job c's steps %q", got)
	}
	// Leases that no longer hold: nothing written, nothing reported.
	out, err = be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{rec(b, "late"), rec(c, "late")}})
	if err != nil || len(out) != 2 || out[0] != (backend.StepRecordResult{}) || out[1] != (backend.StepRecordResult{}) {
		t.Fatalf("records of finished jobs: %+v %v", out, err)
	}
	// The records go with their job.
	if _, err := be.JobDelete(ctx, &backend.JobDeleteParams{ID: b.ID}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, be, `SELECT count(*) FROM spool_step_sets WHERE job_id = ?`, b.ID); n != 0 {
		t.Fatalf("%d sets of a deleted job", n)
	}
}

// TestStepSetsAfterUpgrade: records a client wrote before schema 14
// (spool_steps rows) are read after the upgrade beside the sets written
// since, and their names are still recorded once.
func TestStepSetsAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 13)
	rows := claimAll(t, be, 1)
	l := rows[0].Lease()
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_steps (job_id, name, result, fence, created_at) VALUES (?, 'old', '{"a": 1}', ?, 1)`, l.ID, l.Fence); err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: []backend.StepRecordParams{
		{Lease: l, Name: "new", Result: json.RawMessage(`2`)}, {Lease: l, Name: "old", Result: json.RawMessage(`3`)},
	}})
	if err != nil || !out[0].Recorded || out[1].Recorded || !errors.Is(out[1].Err, backend.ErrStepRecorded) {
		t.Fatalf("records after the upgrade: %+v %v", out, err)
	}
	d, err := be.JobDurable(ctx, l.ID)
	if err != nil || len(d.Steps) != 2 || d.Steps[0].Name != "old" || string(d.Steps[0].Result) != `{"a": 1}` || d.Steps[1].Name != "new" {
		t.Fatalf("steps after the upgrade: %+v %v", d, err)
	}
}

// TestGroupStepSets: records are grouped by lease whatever their order,
// each set keeping its records' order; a name given twice for one lease
// is left to the one-by-one path; a name or result not valid UTF-8 sends
// the whole write there.
func TestGroupStepSets(t *testing.T) {
	l1, l2 := backend.LeaseRef{ID: 2, Fence: 1}, backend.LeaseRef{ID: 1, Fence: 3}
	r := func(l backend.LeaseRef, name, result string) backend.StepRecordParams {
		return backend.StepRecordParams{Lease: l, Name: name, Result: json.RawMessage(result)}
	}
	rs := []backend.StepRecordParams{r(l1, "a", `1`), r(l2, "b\"\n\x01", `"é\\"`), r(l1, "c", `{"x": [1, 2]}`), r(l1, "a", `4`)}
	g := groupStepSets(rs)
	if !g.ok || !slices.Equal(g.leases, []backend.LeaseRef{l2, l1}) || !slices.Equal(g.order, []int{1, 0, 2}) ||
		!slices.Equal(g.ends, []int{1, 3}) || !slices.Equal(g.rest, []int{3}) {
		t.Fatalf("grouped %+v", g)
	}
	wantNames := []string{`["b\"\n\u0001"]`, `["a","c"]`}
	wantResults := []string{`["\"é\\\\\""]`, `["1","{\"x\": [1, 2]}"]`}
	if !slices.Equal(g.names, wantNames) || !slices.Equal(g.results, wantResults) {
		t.Fatalf("sets' names %q, results %q; want %q, %q", g.names, g.results, wantNames, wantResults)
	}
	// What the arrays hold decodes to the records' names and results.
	for k, set := range [][]int{{1}, {0, 2}} {
		var names, results []string
		if err := json.Unmarshal([]byte(g.names[k]), &names); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(g.results[k]), &results); err != nil {
			t.Fatal(err)
		}
		for j, i := range set {
			if names[j] != rs[i].Name || results[j] != string(rs[i].Result) {
				t.Fatalf("set %d record %d: %q %q, want %q %q", k, j, names[j], results[j], rs[i].Name, rs[i].Result)
			}
		}
	}
	if g := groupStepSets([]backend.StepRecordParams{r(l1, "a", "\"\xff\"")}); g.ok {
		t.Fatalf("a result not valid UTF-8 grouped: %+v", g)
	}
}
