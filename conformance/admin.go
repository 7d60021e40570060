package conformance

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testCancelJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, nil)
	j, err := c.JobCancel(ctx, id)
	if err != nil || j.State != backend.StateCancelled || j.FinalizedAt == nil {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if _, err := c.JobCancel(ctx, id); !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := c.JobCancel(ctx, id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	if _, err := c.JobGet(ctx, id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if rows, _ := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"}); len(rows) != 0 {
		t.Fatal("cancelled job was claimed")
	}
}

func testRetryDiscarded(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var fail atomic.Bool
	fail.Store(true)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if fail.Load() {
			return errors.New("broken")
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 2})
	dead := waitState(t, be, id, backend.StateDiscarded)
	fail.Store(false)
	j, err := c.JobRetry(context.Background(), id)
	if err != nil || j.State != backend.StateAvailable || j.Attempt != 0 || j.FinalizedAt != nil {
		t.Fatalf("retry: %+v %v", j, err)
	}
	done := waitState(t, be, id, backend.StateCompleted)
	if done.Attempt != 1 || done.Fence != dead.Fence+1 || len(done.Errors) != 2 {
		t.Fatalf("after manual retry: attempt %d fence %d (was %d) errors %d", done.Attempt, done.Fence, dead.Fence, len(done.Errors))
	}
	if _, err := c.JobRetry(context.Background(), id+1000); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("retry missing: %v", err)
	}
}

// testListNewestAndBounds checks JobList's newest-first order, its paging
// by BeforeID, and the insert-time bounds, against the same rows listed in
// id order.
func testListNewestAndBounds(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	var ids []int64
	for i := range 7 {
		queue := "lista"
		if i%2 == 1 {
			queue = "listb"
		}
		ids = append(ids, insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: queue}))
	}
	mid, err := c.JobGet(ctx, ids[3])
	if err != nil {
		t.Fatal(err)
	}
	list := func(p backend.JobListParams) []int64 {
		t.Helper()
		rows, err := c.JobList(ctx, &p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		var out []int64
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	same := func(what string, got, want []int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
		}
	}
	// Listings are in id order, which a store over several databases (a
	// sharded backend) need not give in insert order: expect by id.
	byID := slices.Clone(ids)
	slices.Sort(byID)
	var listA []int64
	for i := 0; i < len(ids); i += 2 {
		listA = append(listA, ids[i])
	}
	slices.Sort(listA)
	slices.Reverse(listA)
	same("newest, two a page", list(backend.JobListParams{Newest: true, Limit: 2}), []int64{byID[6], byID[5]})
	same("newest, next page", list(backend.JobListParams{Newest: true, Limit: 2, BeforeID: byID[5]}), []int64{byID[4], byID[3]})
	same("newest of queue lista", list(backend.JobListParams{Newest: true, Queue: "lista"}), listA)
	same("oldest first, bounded above", list(backend.JobListParams{BeforeID: byID[2]}), []int64{byID[0], byID[1]})
	// Insert times are the store's; one microsecond either side of the
	// middle job's keeps it in and every job of another time out.
	var want []int64
	for _, id := range ids {
		j, err := c.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.CreatedAt.Equal(mid.CreatedAt) {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	same("created around the middle job", list(backend.JobListParams{
		CreatedAfter:  mid.CreatedAt.Add(-time.Microsecond),
		CreatedBefore: mid.CreatedAt.Add(time.Microsecond),
	}), want)
	if got := list(backend.JobListParams{CreatedAfter: mid.CreatedAt.Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("created after an hour from now: %v", got)
	}
}

// testDeleteJob deletes a pending and a finished job, and refuses a running
// one and a missing one.
func testDeleteJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	pending := insert(t, c, NoteArgs{}, nil)
	j, err := c.JobDelete(ctx, pending)
	if err != nil || j.ID != pending || j.State != backend.StateAvailable {
		t.Fatalf("delete pending: %+v %v", j, err)
	}
	if _, err := c.JobGet(ctx, pending); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := c.JobDelete(ctx, pending); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	running := insert(t, c, NoteArgs{}, nil)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != running {
		t.Fatalf("claim: %v %v", rows, err)
	}
	if _, err := c.JobDelete(ctx, running); !errors.Is(err, spool.ErrInvalidState) {
		t.Fatalf("delete running: %v", err)
	}
	if j, err := c.JobGet(ctx, running); err != nil || j.State != backend.StateRunning {
		t.Fatalf("running job after a refused delete: %+v %v", j, err)
	}
	if _, err := c.JobCancel(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobDelete(ctx, running); err != nil {
		t.Fatalf("delete cancelled: %v", err)
	}
}

// testThroughput finishes jobs three ways and counts them by bucket.
func testThroughput(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	if _, err := c.JobThroughput(ctx, "", 8*24*time.Hour, time.Minute); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Fatalf("an 8-day window: %v", err)
	}
	if _, err := c.JobThroughput(ctx, "", time.Hour, 1500*time.Millisecond); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Fatalf("a bucket of 1.5 s: %v", err)
	}
	var ids []int64
	for range 5 {
		ids = append(ids, insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "tput"}))
	}
	other := insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "tputother"})
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "tput", Max: 5, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 5 {
		t.Fatalf("claim: %d %v", len(rows), err)
	}
	rowsOther, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "tputother", Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rowsOther) != 1 || rowsOther[0].ID != other {
		t.Fatalf("claim other: %v %v", rowsOther, err)
	}
	outcomes := []backend.Outcome{backend.OutcomeComplete, backend.OutcomeComplete, backend.OutcomeComplete, backend.OutcomeDiscard, backend.OutcomeCancel}
	var fins []backend.JobFinish
	for i, r := range rows {
		f := backend.JobFinish{Lease: r.Lease(), Outcome: outcomes[i]}
		if outcomes[i] != backend.OutcomeComplete {
			f.Error = &backend.AttemptError{At: time.Now(), Attempt: 1, Error: "finished by the test"}
		}
		fins = append(fins, f)
	}
	fins = append(fins, backend.JobFinish{Lease: rowsOther[0].Lease(), Outcome: backend.OutcomeComplete})
	if res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fins}); err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish: %v %v", res, err)
	}
	sum := func(queue string) (n backend.ThroughputBucket) {
		t.Helper()
		bs, err := c.JobThroughput(ctx, queue, time.Hour, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bs {
			if b.Start.Unix()%60 != 0 || b.Start.After(time.Now().Add(time.Minute)) || b.Start.Before(time.Now().Add(-2*time.Hour)) {
				t.Fatalf("bucket start %s is not a minute of the last hour", b.Start)
			}
			if i > 0 && !bs[i-1].Start.Before(b.Start) {
				t.Fatalf("buckets out of order: %v", bs)
			}
			n.Completed += b.Completed
			n.Discarded += b.Discarded
			n.Cancelled += b.Cancelled
		}
		return n
	}
	if n := sum("tput"); n.Completed != 3 || n.Discarded != 1 || n.Cancelled != 1 {
		t.Fatalf("queue tput: %+v, want 3 completed, 1 discarded, 1 cancelled", n)
	}
	if n := sum(""); n.Completed != 4 {
		t.Fatalf("every queue: %+v, want 4 completed", n)
	}
}
