package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// insertResult inserts one job and returns the whole result.
func insertResult(t *testing.T, c *spool.Client, args spool.JobArgs, opts *spool.InsertOpts) *spool.InsertResult {
	t.Helper()
	res, err := c.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res
}

// countKind counts the jobs of kind in the store, whatever their state.
func countKind(t *testing.T, be backend.Backend, kind string) int {
	t.Helper()
	n, after := 0, int64(0)
	for {
		rows, err := be.JobList(context.Background(), &backend.JobListParams{Kind: kind, AfterID: after, Limit: 500})
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		if len(rows) == 0 {
			return n
		}
		n += len(rows)
		after = rows[len(rows)-1].ID
	}
}

// testUniqueInsert: a unique insert whose key is held inserts nothing and
// returns the holder; the key is made of exactly what the options choose
// (args, some args fields, an explicit key, the queue, the period); repeats
// within one InsertMany fold into one job; bad options are refused with
// nothing written.
func testUniqueInsert(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	expect := func(what string, res *spool.InsertResult, dup bool, id int64) {
		t.Helper()
		if res.Duplicate != dup || (id != 0 && res.ID != id) {
			t.Fatalf("%s: got id %d duplicate %v, want id %d duplicate %v", what, res.ID, res.Duplicate, id, dup)
		}
	}
	byArgs := &spool.InsertOpts{Unique: &spool.UniqueOpts{ByArgs: true}}
	first := insertResult(t, c, NoteArgs{N: 1}, byArgs)
	expect("first insert", first, false, 0)
	expect("same args", insertResult(t, c, NoteArgs{N: 1}, byArgs), true, first.ID)
	two := insertResult(t, c, NoteArgs{N: 2}, byArgs)
	expect("other args", two, false, 0)
	expect("no unique options", insertResult(t, c, NoteArgs{N: 1}, nil), false, 0)

	fields := &spool.InsertOpts{Unique: &spool.UniqueOpts{ByArgs: true, ArgsFields: []string{"n"}}}
	five := insertResult(t, c, NoteArgs{N: 5, Mode: "a"}, fields)
	expect("args field", five, false, 0)
	expect("same field, other mode", insertResult(t, c, NoteArgs{N: 5, Mode: "b"}, fields), true, five.ID)

	key := &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "k"}}
	k := insertResult(t, c, NoteArgs{N: 3}, key)
	expect("explicit key", k, false, 0)
	expect("same key, other args", insertResult(t, c, NoteArgs{N: 4}, key), true, k.ID)
	expect("same key, other kind", insertResult(t, c, OtherArgs{S: "x"}, key), false, 0)
	expect("same key, other queue", insertResult(t, c, NoteArgs{N: 4}, &spool.InsertOpts{Queue: "q2", Unique: &spool.UniqueOpts{Key: "k"}}), true, k.ID)

	byQueue := func(q string) *spool.InsertOpts {
		return &spool.InsertOpts{Queue: q, Unique: &spool.UniqueOpts{Key: "q", ByQueue: true}}
	}
	qa := insertResult(t, c, NoteArgs{}, byQueue("a"))
	expect("by queue a", qa, false, 0)
	expect("by queue b", insertResult(t, c, NoteArgs{}, byQueue("b")), false, 0)
	expect("by queue a again", insertResult(t, c, NoteArgs{}, byQueue("a")), true, qa.ID)

	hour := time.Now().Add(48 * time.Hour).Truncate(time.Hour)
	byHour := func(at time.Time) *spool.InsertOpts {
		return &spool.InsertOpts{RunAt: at, Unique: &spool.UniqueOpts{Key: "h", ByPeriod: time.Hour}}
	}
	h1 := insertResult(t, c, NoteArgs{}, byHour(hour.Add(time.Minute)))
	expect("period", h1, false, 0)
	expect("same hour", insertResult(t, c, NoteArgs{}, byHour(hour.Add(59*time.Minute))), true, h1.ID)
	expect("next hour", insertResult(t, c, NoteArgs{}, byHour(hour.Add(61*time.Minute))), false, 0)

	row := getJob(t, be, k.ID)
	if len(row.UniqueKey) == 0 || !row.UniqueStates.Has(backend.StateCompleted) || !row.UniqueStates.Has(backend.StateRunning) ||
		row.UniqueStates.Has(backend.StateCancelled) {
		t.Fatalf("stored key %q states %v, want a key held in the default states", row.UniqueKey, row.UniqueStates.States())
	}

	// One call: a new key, a plain job, a repeat of the new key, a key held
	// by an older job.
	before := countKind(t, be, "note")
	res, err := c.InsertMany(ctx, []spool.InsertManyParams{
		{Args: NoteArgs{N: 10}, InsertOpts: byArgs},
		{Args: NoteArgs{N: 10}},
		{Args: NoteArgs{N: 10}, InsertOpts: byArgs},
		{Args: NoteArgs{N: 1}, InsertOpts: byArgs},
	})
	if err != nil {
		t.Fatalf("insert many: %v", err)
	}
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].ID != res[0].ID || !res[3].Duplicate || res[3].ID != first.ID {
		t.Fatalf("insert many results %+v: want new, new, duplicate of the first, duplicate of job %d", res, first.ID)
	}
	if got := countKind(t, be, "note"); got != before+2 {
		t.Fatalf("insert many stored %d jobs, want 2", got-before)
	}
	n, err := c.InsertManyFast(ctx, []spool.InsertManyParams{
		{Args: NoteArgs{N: 11}, InsertOpts: byArgs},
		{Args: NoteArgs{N: 11}, InsertOpts: byArgs},
		{Args: NoteArgs{N: 2}, InsertOpts: byArgs},
		{Args: NoteArgs{N: 12}},
	})
	if err != nil || n != 2 {
		t.Fatalf("insert many fast: %d inserted, %v; want 2", n, err)
	}

	before = countKind(t, be, "note")
	for _, bad := range []*spool.UniqueOpts{
		{Key: "s", States: []spool.JobState{spool.JobStateAvailable, spool.JobStateScheduled, spool.JobStateRetryable}},
		{Key: "s", States: []spool.JobState{"finished"}},
		{ArgsFields: []string{"n"}},
		{ByPeriod: -time.Hour},
		{Key: string(make([]byte, spool.UniqueKeyMaxBytes+1))},
	} {
		_, err := c.Insert(ctx, NoteArgs{N: 99}, &spool.InsertOpts{Unique: bad})
		var ie *spool.InvalidJobError
		if !errors.As(err, &ie) || ie.Field != "unique" {
			t.Errorf("unique %+v: err = %v, want *InvalidJobError on unique", bad, err)
		}
	}
	if got := countKind(t, be, "note"); got != before {
		t.Fatalf("refused inserts stored %d jobs", got-before)
	}
}

// finishOne claims the only pending job of queue and writes outcome for it.
func finishOne(t *testing.T, be backend.Backend, queue string, id int64, outcome backend.Outcome) {
	t.Helper()
	ctx := context.Background()
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, Max: 10, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("claim from %s: %v, %v; want job %d alone", queue, rowIDs(rows), err, id)
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: rows[0].Lease(), Outcome: outcome}}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish job %d: %v (rejected %v)", id, err, res)
	}
}

// testUniqueStates: a job holds its key while it runs and in the finished
// states its options list, and frees it in the others; retrying a finished
// job whose key a newer job holds is refused with ErrUniqueConflict and
// changes nothing.
func testUniqueStates(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	opts := func(queue string, states ...spool.JobState) *spool.InsertOpts {
		return &spool.InsertOpts{Queue: queue, Unique: &spool.UniqueOpts{Key: queue, States: states}}
	}

	// Default states: a running job holds its key; completed keeps it.
	a := insertResult(t, c, NoteArgs{}, opts("a"))
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "a", Max: 1, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rowIDs(rows), err)
	}
	if r := insertResult(t, c, NoteArgs{}, opts("a")); !r.Duplicate || r.ID != a.ID {
		t.Fatalf("insert while the holder runs: %+v, want a duplicate of %d", r, a.ID)
	}
	if _, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: rows[0].Lease(), Outcome: backend.OutcomeComplete}}}); err != nil {
		t.Fatal(err)
	}
	if r := insertResult(t, c, NoteArgs{}, opts("a")); !r.Duplicate || r.ID != a.ID {
		t.Fatalf("insert after the holder completed: %+v, want a duplicate of %d (completed is a default state)", r, a.ID)
	}

	// Only the required states: a completed job frees its key.
	required := []spool.JobState{spool.JobStateAvailable, spool.JobStateScheduled, spool.JobStateRetryable, spool.JobStateRunning}
	b := insertResult(t, c, NoteArgs{}, opts("b", required...))
	finishOne(t, be, "b", b.ID, backend.OutcomeComplete)
	b2 := insertResult(t, c, NoteArgs{}, opts("b", required...))
	if b2.Duplicate || b2.ID == b.ID {
		t.Fatalf("insert after the holder completed: %+v, want a new job (completed not among the states)", b2)
	}

	// Default states: cancelled frees the key; retrying the cancelled job
	// while a newer job holds it is refused.
	x := insertResult(t, c, NoteArgs{}, opts("x"))
	if _, err := c.JobCancel(ctx, x.ID); err != nil {
		t.Fatal(err)
	}
	y := insertResult(t, c, NoteArgs{}, opts("x"))
	if y.Duplicate {
		t.Fatalf("insert after the holder was cancelled: %+v, want a new job", y)
	}
	if _, err := c.JobRetry(ctx, x.ID); !errors.Is(err, spool.ErrUniqueConflict) {
		t.Fatalf("retry of a job whose key is taken: %v, want ErrUniqueConflict", err)
	}
	if j := getJob(t, be, x.ID); j.State != backend.StateCancelled {
		t.Fatalf("refused retry left job %d %s, want cancelled", x.ID, j.State)
	}
	if _, err := c.JobCancel(ctx, y.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := c.JobRetry(ctx, x.ID); err != nil || j.State != backend.StateAvailable {
		t.Fatalf("retry once the key is free: %v, %v", j, err)
	}
	if r := insertResult(t, c, NoteArgs{}, opts("x")); !r.Duplicate || r.ID != x.ID {
		t.Fatalf("insert after the retry: %+v, want a duplicate of the retried job %d", r, x.ID)
	}
}

// testUniqueConcurrent: 100 concurrent inserts of one key from three handles
// on the store (as three processes) make exactly one job, and every insert
// returns its id.
func testUniqueConcurrent(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	clients := []*spool.Client{
		newClient(t, be, &spool.Config{Logger: quietLogger()}),
		newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger()}),
		newClient(t, h.Reopen(t, be), &spool.Config{Logger: quietLogger()}),
	}
	const inserts = 100
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[int64]int{}
		created int
		errs    []error
		gate    = make(chan struct{})
	)
	for i := range inserts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			res, err := clients[i%len(clients)].Insert(context.Background(), NoteArgs{N: i}, &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "race"}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[res.ID]++
			if !res.Duplicate {
				created++
			}
		}()
	}
	close(gate)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d inserts failed, first: %v", len(errs), inserts, errs[0])
	}
	if created != 1 || len(ids) != 1 {
		t.Fatalf("%d inserts created a job, ids returned %v; want exactly one job for all", created, ids)
	}
	if n := countKind(t, be, "note"); n != 1 {
		t.Fatalf("%d jobs stored, want 1", n)
	}
}

// testUniqueTxRollback: a unique job inserted in a transaction that rolls
// back leaves its key free; one that commits holds it.
func testUniqueTxRollback(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	opts := &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "tx"}}
	tx := h.BeginTx(t, be)
	res, err := c.InsertTx(ctx, btx(tx), NoteArgs{}, opts)
	if err != nil || res.Duplicate {
		t.Fatalf("insert in tx: %+v, %v", res, err)
	}
	if again, err := c.InsertTx(ctx, btx(tx), NoteArgs{}, opts); err != nil || !again.Duplicate || again.ID != res.ID {
		t.Fatalf("second insert in the same tx: %+v, %v; want a duplicate of %d", again, err, res.ID)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	after := insertResult(t, c, NoteArgs{}, opts)
	if after.Duplicate {
		t.Fatalf("insert after rollback: %+v, want a new job", after)
	}
	tx = h.BeginTx(t, be)
	if in, err := c.InsertTx(ctx, btx(tx), NoteArgs{}, opts); err != nil || !in.Duplicate || in.ID != after.ID {
		t.Fatalf("insert in tx of a committed key: %+v, %v; want a duplicate of %d", in, err, after.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countKind(t, be, "note"); n != 1 {
		t.Fatalf("%d jobs stored, want 1", n)
	}
}
