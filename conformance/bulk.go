package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testBulkActions: bulk retry, cancel and delete change exactly the jobs
// that match every filter and that the action applies to, across batches;
// a second run changes nothing; a running job is cancelled (its lease
// fails) but never deleted; a unique job whose key a newer job holds is
// counted as a conflict and left alone; a filter that selects everything,
// or a bad one, is refused and changes nothing.
func testBulkActions(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	state := func(id int64) backend.State { t.Helper(); return getJob(t, be, id).State }

	var mail, other []int64
	for i := range 5 {
		mail = append(mail, insert(t, c, NoteArgs{N: i}, &spool.InsertOpts{Queue: "mail"}))
	}
	for i := range 3 {
		other = append(other, insert(t, c, NoteArgs{N: i}, &spool.InsertOpts{Queue: "other"}))
	}
	// Discard mail's first three.
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "mail", Max: 3, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %v %v", rowIDs(rows), err)
	}
	var fin []backend.JobFinish
	for _, r := range rows {
		fin = append(fin, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeDiscard})
	}
	if _, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fin}); err != nil {
		t.Fatal(err)
	}

	retry := spool.JobFilter{Queue: "mail", States: []spool.JobState{spool.JobStateDiscarded}, BatchSize: 2}
	if res, err := c.JobsRetry(ctx, retry); err != nil || res.Changed != 3 {
		t.Fatalf("retry discarded mail: %+v, %v; want 3 changed", res, err)
	}
	for _, id := range mail[:3] {
		if j := getJob(t, be, id); j.State != backend.StateAvailable || j.Attempt != 0 {
			t.Fatalf("job %d after bulk retry: %s attempt %d, want available attempt 0", id, j.State, j.Attempt)
		}
	}
	if res, err := c.JobsRetry(ctx, retry); err != nil || res.Changed != 0 {
		t.Fatalf("second retry: %+v, %v; want nothing changed", res, err)
	}
	if res, err := c.JobsRetry(ctx, spool.JobFilter{Queue: "mail"}); err != nil || res.Changed != 0 {
		t.Fatalf("retry of available jobs: %+v, %v; want nothing changed", res, err)
	}

	// Cancel other's jobs, one of them running.
	running, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "other", Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(running) != 1 {
		t.Fatalf("claim: %v %v", rowIDs(running), err)
	}
	if res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "other", BatchSize: 1}); err != nil || res.Changed != 3 {
		t.Fatalf("cancel other: %+v, %v; want 3 changed", res, err)
	}
	for _, id := range other {
		if s := state(id); s != backend.StateCancelled {
			t.Fatalf("job %d after bulk cancel: %s", id, s)
		}
	}
	hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: []backend.LeaseRef{running[0].Lease()}, Lease: time.Minute})
	if err != nil || len(hb.Lost) != 1 {
		t.Fatalf("heartbeat of the cancelled running job: %+v, %v; want its lease lost", hb, err)
	}
	if res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "other"}); err != nil || res.Changed != 0 {
		t.Fatalf("second cancel: %+v, %v", res, err)
	}

	// Time range: only mail's jobs created before the fourth one.
	bound := getJob(t, be, mail[3]).CreatedAt
	if !getJob(t, be, mail[2]).CreatedAt.Before(bound) {
		t.Fatalf("job %d was created at %v, not before job %d at %v", mail[2], getJob(t, be, mail[2]).CreatedAt, mail[3], bound)
	}
	if res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "mail", CreatedBefore: bound}); err != nil || res.Changed != 3 {
		t.Fatalf("cancel mail created before job %d: %+v, %v; want 3", mail[3], res, err)
	}
	if s := state(mail[3]); s != backend.StateAvailable {
		t.Fatalf("job %d, created at the bound, is %s", mail[3], s)
	}

	// Delete never takes a running job.
	run, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "mail", Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(run) != 1 || (run[0].ID != mail[3] && run[0].ID != mail[4]) {
		t.Fatalf("claim: %v %v; want one of the two jobs left in mail", rowIDs(run), err)
	}
	if res, err := c.JobsDelete(ctx, spool.JobFilter{Kind: "note"}); err != nil || res.Changed != 8-1 {
		t.Fatalf("delete notes: %+v, %v; want 7 (all but the running one)", res, err)
	}
	if s := state(run[0].ID); s != backend.StateRunning {
		t.Fatalf("running job after bulk delete: %s", s)
	}
	if n := countKind(t, be, "note"); n != 1 {
		t.Fatalf("%d notes left, want the running one", n)
	}

	// A unique job whose key was taken meanwhile is a conflict.
	u := &spool.InsertOpts{Queue: "u", Unique: &spool.UniqueOpts{Key: "u"}}
	a := insert(t, c, NoteArgs{}, u)
	if _, err := c.JobCancel(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := insert(t, c, NoteArgs{}, u)
	res, err := c.JobsRetry(ctx, spool.JobFilter{Queue: "u", States: []spool.JobState{spool.JobStateCancelled}})
	if err != nil || res.Changed != 0 || res.UniqueConflicts != 1 {
		t.Fatalf("retry of a unique job whose key is taken: %+v, %v; want 1 conflict", res, err)
	}
	if s := state(a); s != backend.StateCancelled {
		t.Fatalf("conflicting job %d is %s, want cancelled", a, s)
	}
	if _, err := c.JobCancel(ctx, b); err != nil {
		t.Fatal(err)
	}
	if res, err := c.JobsRetry(ctx, spool.JobFilter{Queue: "u", States: []spool.JobState{spool.JobStateCancelled}}); err != nil || res.Changed != 1 || res.UniqueConflicts != 1 {
		// a takes its key back; b then finds it held.
		t.Fatalf("retry once the key is free: %+v, %v; want 1 changed and 1 conflict", res, err)
	}

	for _, bad := range []spool.JobFilter{
		{},
		{BatchSize: 5},
		{Queue: "bad queue"},
		{States: []spool.JobState{"done"}},
		{Queue: "u", BatchSize: -1},
		{Queue: "u", CreatedAfter: time.Now(), CreatedBefore: time.Now().Add(-time.Hour)},
	} {
		if res, err := c.JobsDelete(ctx, bad); !errors.Is(err, spool.ErrInvalidConfig) || res.Changed != 0 {
			t.Errorf("delete %+v: %+v, %v; want ErrInvalidConfig", bad, res, err)
		}
	}
	if n := countKind(t, be, "note"); n != 3 {
		t.Fatalf("%d notes after refused deletes, want 3", n)
	}
}
