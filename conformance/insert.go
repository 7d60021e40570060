package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testInsertAndWork(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	got := make(chan spool.Job[NoteArgs], 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		got <- *j
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, NoteArgs{N: 42}, &spool.InsertOpts{Tags: []string{"a", "b:c"}, Metadata: json.RawMessage(`{"x": 1}`)})
	j := recv(t, got, "job run")
	if j.ID != id || j.Args.N != 42 || j.Attempt != 1 || j.Kind != "note" || j.Queue != "default" {
		t.Fatalf("worker saw %+v args %+v", j.JobRow, j.Args)
	}
	if len(j.Tags) != 2 || j.Tags[1] != "b:c" {
		t.Fatalf("tags = %v", j.Tags)
	}
	done := waitState(t, be, id, backend.StateCompleted)
	if done.FinalizedAt == nil || done.LeasedUntil != nil {
		t.Fatalf("completed job: finalized %v leased_until %v", done.FinalizedAt, done.LeasedUntil)
	}
	var meta map[string]int
	if err := json.Unmarshal(done.Metadata, &meta); err != nil || meta["x"] != 1 {
		t.Fatalf("metadata = %s (%v)", done.Metadata, err)
	}
}

type prioArgs struct{ N int }

// Kind implements spool.JobArgs.
func (prioArgs) Kind() string { return "prio" }

// InsertOpts gives the args type's own defaults.
func (prioArgs) InsertOpts() spool.InsertOpts {
	return spool.InsertOpts{Queue: "q-from-args", Priority: 7, MaxAttempts: 3}
}

func testInsertOptions(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()}) // insert-only
	ctx := context.Background()
	id := insert(t, c, prioArgs{}, nil)
	j := getJob(t, be, id)
	if j.Queue != "q-from-args" || j.Priority != 7 || j.MaxAttempts != 3 || j.State != backend.StateAvailable {
		t.Fatalf("args defaults not applied: %+v", j)
	}
	id = insert(t, c, prioArgs{}, &spool.InsertOpts{Queue: "other", MaxAttempts: 9})
	j = getJob(t, be, id)
	if j.Queue != "other" || j.Priority != 7 || j.MaxAttempts != 9 {
		t.Fatalf("options did not override field by field: %+v", j)
	}
	id = insert(t, c, prioArgs{}, ptr(spool.InsertOpts{}.WithPriority(0)))
	if j = getJob(t, be, id); j.Priority != 0 {
		t.Fatalf("explicit priority 0 did not override: %d", j.Priority)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	id = insert(t, c, NoteArgs{}, &spool.InsertOpts{RunAt: at})
	j = getJob(t, be, id)
	if j.State != backend.StateScheduled || !j.RunAt.Equal(at) {
		t.Fatalf("run_at: state %s run_at %v want %v", j.State, j.RunAt, at)
	}
	res, err := c.InsertMany(ctx, []spool.InsertManyParams{
		{Args: NoteArgs{N: 1}}, {Args: NoteArgs{N: 2}, InsertOpts: &spool.InsertOpts{Delay: time.Hour}},
	})
	if err != nil || len(res) != 2 || res[0].ID >= res[1].ID {
		t.Fatalf("insert many: %+v %v", res, err)
	}
	if j := getJob(t, be, res[1].ID); j.State != backend.StateScheduled || time.Until(j.RunAt) < 59*time.Minute {
		t.Fatalf("delay: %+v", j)
	}
	// A large batch takes the bulk path; ids come back in input order.
	many := make([]spool.InsertManyParams, 1500)
	for i := range many {
		many[i] = spool.InsertManyParams{Args: NoteArgs{N: i}, InsertOpts: &spool.InsertOpts{Tags: []string{"bulk"}}}
	}
	res, err = c.InsertMany(ctx, many)
	if err != nil || len(res) != len(many) {
		t.Fatalf("bulk insert: %d results, %v", len(res), err)
	}
	for _, i := range []int{0, 777, 1499} {
		j := getJob(t, be, res[i].ID)
		var a NoteArgs
		if err := json.Unmarshal(j.Args, &a); err != nil || a.N != i || len(j.Tags) != 1 {
			t.Fatalf("bulk row %d: args %s tags %v", i, j.Args, j.Tags)
		}
	}
}

func ptr[T any](v T) *T { return &v }

type badArgs struct{ C chan int }

// Kind implements spool.JobArgs.
func (badArgs) Kind() string { return "note" }

type bigArgs struct{ S string }

// Kind implements spool.JobArgs.
func (bigArgs) Kind() string { return "note" }

func testInsertBadInput(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[NoteArgs]) error { return nil }))
	c := newClient(t, be, &spool.Config{Workers: ws, Logger: quietLogger()})
	ctx := context.Background()
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'q'
	}
	cases := []struct {
		name  string
		args  spool.JobArgs
		opts  *spool.InsertOpts
		field string
		is    error
	}{
		{"unknown kind", OtherArgs{}, nil, "kind", spool.ErrUnknownKind},
		{"args do not encode", badArgs{C: make(chan int)}, nil, "args", spool.ErrArgsEncode},
		{"args too large", bigArgs{S: string(make([]byte, spool.DefaultMaxArgsBytes))}, nil, "args", spool.ErrArgsTooLarge},
		{"queue with SQL", NoteArgs{}, &spool.InsertOpts{Queue: "x'; drop table spool_jobs; --"}, "queue", nil},
		{"queue too long", NoteArgs{}, &spool.InsertOpts{Queue: string(long)}, "queue", nil},
		{"queue starts with dot", NoteArgs{}, &spool.InsertOpts{Queue: ".hidden"}, "queue", nil},
		{"negative priority", NoteArgs{}, &spool.InsertOpts{Priority: -1}, "priority", nil},
		{"priority too high", NoteArgs{}, &spool.InsertOpts{Priority: 101}, "priority", nil},
		{"negative max attempts", NoteArgs{}, &spool.InsertOpts{MaxAttempts: -1}, "max_attempts", nil},
		{"max attempts too high", NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1001}, "max_attempts", nil},
		{"bad tag", NoteArgs{}, &spool.InsertOpts{Tags: []string{"has space"}}, "tags", nil},
		{"metadata not object", NoteArgs{}, &spool.InsertOpts{Metadata: json.RawMessage(`[1]`)}, "metadata", nil},
		{"metadata not JSON", NoteArgs{}, &spool.InsertOpts{Metadata: json.RawMessage(`{`)}, "metadata", nil},
		{"negative delay", NoteArgs{}, &spool.InsertOpts{Delay: -time.Second}, "run_at", nil},
	}
	for _, tc := range cases {
		_, err := c.Insert(ctx, tc.args, tc.opts)
		var ie *spool.InvalidJobError
		if !errors.As(err, &ie) || !errors.Is(err, spool.ErrInvalidJob) || ie.Field != tc.field {
			t.Errorf("%s: err = %v, want *InvalidJobError on %s", tc.name, err, tc.field)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: err = %v, want errors.Is %v", tc.name, err, tc.is)
		}
	}
	// An explicit opt-in allows unknown kinds; an insert-only client never checks.
	if _, err := newClient(t, be, &spool.Config{Workers: ws, AllowUnknownKinds: true, Logger: quietLogger()}).Insert(ctx, OtherArgs{}, nil); err != nil {
		t.Errorf("AllowUnknownKinds: %v", err)
	}
	if _, err := newClient(t, be, &spool.Config{Logger: quietLogger()}).Insert(ctx, OtherArgs{}, nil); err != nil {
		t.Errorf("insert-only client: %v", err)
	}
	if got := countStates(t, be)[backend.StateAvailable]; got != 2 {
		t.Fatalf("%d jobs written, want only the 2 valid ones", got)
	}
	// A transaction of the wrong type is a typed error too.
	if _, err := c.InsertTx(ctx, "not a tx", NoteArgs{}, nil); !errors.Is(err, spool.ErrTxType) {
		t.Fatalf("InsertTx with a string: %v", err)
	}
}

func testInsertManyAllOrNothing(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	for _, n := range []int{3, 1200} { // small path and bulk path
		params := Notes(0, n)
		params[n-1].InsertOpts = &spool.InsertOpts{Priority: 500}
		_, err := c.InsertMany(context.Background(), params)
		var ie *spool.InvalidJobError
		if !errors.As(err, &ie) || ie.Field != "priority" {
			t.Fatalf("n=%d: err = %v", n, err)
		}
	}
	if got := countStates(t, be); len(got) != 0 {
		t.Fatalf("rows written despite an invalid job: %v", got)
	}
}

func testInsertManyFast(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	for _, n := range []int{7, 1300} { // below and above any bulk threshold
		params := make([]spool.InsertManyParams, n)
		for i := range params {
			params[i] = spool.InsertManyParams{Args: NoteArgs{N: i}, InsertOpts: &spool.InsertOpts{Queue: fmt.Sprintf("fast%d", n)}}
		}
		params[0].InsertOpts.Delay = time.Hour
		params[1].InsertOpts = &spool.InsertOpts{Queue: fmt.Sprintf("fast%d", n), Priority: 9, Tags: []string{"t1", "t2"}, Metadata: json.RawMessage(`{"k":"v"}`)}
		got, err := c.InsertManyFast(ctx, params)
		if err != nil || got != n {
			t.Fatalf("n=%d: count %d, %v", n, got, err)
		}
		rows, err := be.JobList(ctx, &backend.JobListParams{Queue: fmt.Sprintf("fast%d", n), Limit: 2000})
		if err != nil || len(rows) != n {
			t.Fatalf("n=%d: listed %d, %v", n, len(rows), err)
		}
		delayed, tagged := rows[0], rows[1]
		if delayed.State != backend.StateScheduled || delayed.RunAt.Sub(delayed.CreatedAt) < 59*time.Minute {
			t.Fatalf("n=%d: delayed row %+v", n, delayed)
		}
		if tagged.Priority != 9 || len(tagged.Tags) != 2 || tagged.State != backend.StateAvailable {
			t.Fatalf("n=%d: row %+v", n, tagged)
		}
		var meta map[string]string
		if err := json.Unmarshal(tagged.Metadata, &meta); err != nil || meta["k"] != "v" {
			t.Fatalf("n=%d: metadata %s", n, tagged.Metadata)
		}
		// All or nothing, inside a transaction too.
		params[n-1].InsertOpts = &spool.InsertOpts{MaxAttempts: -3}
		if _, err := c.InsertManyFast(ctx, params); !errors.Is(err, spool.ErrInvalidJob) {
			t.Fatalf("n=%d: invalid batch: %v", n, err)
		}
		params[n-1].InsertOpts = &spool.InsertOpts{Queue: fmt.Sprintf("fast%d", n)}
		tx := h.BeginTx(t, be)
		if got, err := c.InsertManyFastTx(ctx, btx(tx), params); err != nil || got != n {
			t.Fatalf("n=%d: in tx: %d %v", n, got, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if total := countStates(t, be); total[backend.StateAvailable]+total[backend.StateScheduled] != 7+1300 {
		t.Fatalf("rows after rollback and rejected batch: %v", total)
	}
}

func testInsertTxRollback(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan int, 10)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- j.Args.N
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 4))
	start(t, c)
	ctx := context.Background()
	tx := h.BeginTx(t, be)
	if _, err := c.InsertTx(ctx, btx(tx), NoteArgs{N: 1}, nil); err != nil {
		t.Fatalf("insert tx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	// A job inserted after the rolled-back one runs; had the first survived,
	// FIFO order would have run it first.
	tx = h.BeginTx(t, be)
	if _, err := c.InsertManyTx(ctx, btx(tx), []spool.InsertManyParams{{Args: NoteArgs{N: 2}}}); err != nil {
		t.Fatalf("insert many tx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := recv(t, ran, "committed job"); n != 2 {
		t.Fatalf("ran job %d, want 2 (the rolled-back job must never run)", n)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("another job ran: %d", <-ran)
	}
	if got := countStates(t, be); got[backend.StateCompleted] != 1 || len(got) != 1 {
		t.Fatalf("states = %v, want one completed job", got)
	}
}

func testInsertTxInvisibleUntilCommit(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	tx := h.BeginTx(t, be)
	if _, err := c.InsertTx(ctx, btx(tx), NoteArgs{N: 1}, nil); err != nil {
		t.Fatalf("insert tx: %v", err)
	}
	claim := func() int {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 10, Lease: time.Minute, ClaimID: "t"})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		return len(rows)
	}
	if n := claim(); n != 0 {
		t.Fatalf("claimed %d uncommitted jobs", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := claim(); n != 1 {
		t.Fatalf("claimed %d jobs after commit, want 1", n)
	}
}
