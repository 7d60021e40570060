// Package conformance is the behavioural suite every Spool backend must pass.
// It drives the public client API (and the backend interface directly where
// the contract is about the store) against a fresh store per test. A
// backend's own tests call Run with a Harness.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// Tx is a transaction opened by the harness. The suite passes it to the
// client as a backend.Tx: the value itself, or, when it implements
// BackendTxer, what BackendTx returns (for drivers whose transaction type
// lacks context-taking Commit and Rollback, such as *sql.Tx).
type Tx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// BackendTxer is implemented by harness transactions that wrap the value the
// backend accepts.
type BackendTxer interface {
	BackendTx() backend.Tx
}

// btx returns what the suite passes to the client for tx.
func btx(tx Tx) backend.Tx {
	if w, ok := tx.(BackendTxer); ok {
		return w.BackendTx()
	}
	return tx
}

// Harness adapts a backend to the suite.
type Harness struct {
	// NewBackend returns a backend on a fresh, migrated store, cleaned up when
	// the test ends. Every call makes a new, independent store; Reopen gives
	// a second handle on the same store.
	NewBackend func(t *testing.T) backend.Backend
	// Reopen returns another backend on the same store as be, as a second
	// process would have.
	Reopen func(t *testing.T, be backend.Backend) backend.Backend
	// BeginTx opens a transaction on be's store.
	BeginTx func(t *testing.T, be backend.Backend) Tx
}

// Run runs every conformance test.
func Run(t *testing.T, h Harness) {
	tests := []namedTest{
		{"InsertAndWork", testInsertAndWork},
		{"InsertOptions", testInsertOptions},
		{"InsertBadInput", testInsertBadInput},
		{"InsertManyAllOrNothing", testInsertManyAllOrNothing},
		{"InsertManyFast", testInsertManyFast},
		{"InsertTxRollbackNeverRuns", testInsertTxRollback},
		{"InsertTxInvisibleUntilCommit", testInsertTxInvisibleUntilCommit},
		{"ClaimOrder", testClaimOrder},
		{"NoJobRunsTwice", testNoJobRunsTwice},
		{"RetryThenSucceed", testRetryThenSucceed},
		{"RetryBackoffUsesDatabaseClock", testRetryBackoff},
		{"MaxAttemptsDiscards", testMaxAttemptsDiscards},
		{"Snooze", testSnooze},
		{"CancelAndDiscardOutcomes", testCancelAndDiscardOutcomes},
		{"UndecodableArgsDiscarded", testUndecodableArgs},
		{"PanicRecorded", testPanicRecorded},
		{"Timeout", testTimeout},
		{"FencingRejectsStaleLease", testFencing},
		{"ReleaseLostClaim", testReleaseLostClaim},
		{"HeartbeatKeepsLongJob", testHeartbeatKeepsLongJob},
		{"LostLeaseCancelsJob", testLostLeaseCancelsJob},
		{"RescueExpiredLease", testRescue},
		{"RescueDiscardsAtMaxAttempts", testRescueDiscards},
		{"RescueKeepsPlaceInQueue", testRescueKeepsPlace},
		{"CancelPendingAndRunning", testCancelJob},
		{"RetryDiscardedJob", testRetryDiscarded},
		{"CompleteTxExactlyOnce", testCompleteTx},
		{"CompleteTxThenHeartbeatQuiet", testCompleteTxHeartbeatQuiet},
		{"SoftStopFinishesRunningReleasesBuffered", testSoftStop},
		{"HardStopCancelsRunning", testHardStop},
		{"StopTimeoutEscalates", testStopTimeoutEscalates},
		{"StopReturnsWithStuckHandler", testStopStuckHandler},
		{"StopWithoutDeadlineHurriedByLaterStop", testStopHurried},
		{"TimeoutOverrunRecorded", testTimeoutOverrun},
		{"LeaderElection", testLeaderElection},
		{"Retention", testRetention},
		{"QueueConcurrencyLimit", testQueueConcurrency},
		{"DelayedJob", testDelayedJob},
		{"LocalWakeForDelaysAndRetries", testLocalWake},
		{"StartStopStress", testStartStopStress},
	}
	tests = append(tests, inputEdgeTests()...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// namedTest is one conformance test.
type namedTest struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// ---- fixtures ----

// logWatch is a slog handler that sends the first record whose text (the
// message and its attributes' values) contains msg to seen, and drops
// everything else.
type logWatch struct {
	msg  string
	seen chan<- string
	once sync.Once
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool {
		text += " " + a.Key + "=" + a.Value.String()
		return true
	})
	if strings.Contains(text, w.msg) {
		w.once.Do(func() { w.seen <- text })
	}
	return nil
}

func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

// NoteArgs is the suite's job payload.
type NoteArgs struct {
	N    int    `json:"n"`
	Mode string `json:"mode,omitempty"`
}

// Kind implements spool.JobArgs.
func (NoteArgs) Kind() string { return "note" }

// OtherArgs is a second kind, registered only where a test says so.
type OtherArgs struct{ S string }

// Kind implements spool.JobArgs.
func (OtherArgs) Kind() string { return "other" }

func quietLogger() *slog.Logger {
	level := slog.LevelError + 1
	if os.Getenv("SPOOL_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// fastConfig returns a config with short intervals for tests.
func fastConfig(ws *spool.Workers, workers int) *spool.Config {
	return &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: workers}},
		LeaseDuration:  3 * time.Second,
		PollInterval:   20 * time.Millisecond,
		RescueInterval: 50 * time.Millisecond,
		RetryPolicy:    spool.ConstantRetryPolicy{Delay: 0},
		Logger:         quietLogger(),
	}
}

func newClient(t *testing.T, be backend.Backend, cfg *spool.Config) *spool.Client {
	t.Helper()
	c, err := spool.NewClient(be, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func start(t *testing.T, c *spool.Client) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil && !errors.Is(err, spool.ErrNotStarted) {
			t.Errorf("stop: %v", err)
		}
	})
}

func insert(t *testing.T, c *spool.Client, args spool.JobArgs, opts *spool.InsertOpts) int64 {
	t.Helper()
	res, err := c.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res.ID
}

func getJob(t *testing.T, be backend.Backend, id int64) *backend.JobRow {
	t.Helper()
	j, err := be.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// waitState waits (polling the store, up to 15 s) until job id is in state,
// and returns it. It fails the test with the last state seen otherwise.
func waitState(t *testing.T, be backend.Backend, id int64, state backend.State) *backend.JobRow {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var j *backend.JobRow
	for {
		j = getJob(t, be, id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: state %s, want %s (attempt %d, errors %+v)", id, j.State, state, j.Attempt, j.Errors)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recv waits for a value on ch for up to 15 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func countStates(t *testing.T, be backend.Backend) map[backend.State]int64 {
	t.Helper()
	stats, err := be.QueueStatsAll(context.Background())
	if err != nil {
		t.Fatalf("queue stats: %v", err)
	}
	out := map[backend.State]int64{}
	for _, q := range stats {
		for s, n := range q.Counts {
			out[s] += n
		}
	}
	return out
}

// Notes returns InsertMany params for NoteArgs numbered from first, n of them.
func Notes(first, n int) []spool.InsertManyParams {
	params := make([]spool.InsertManyParams, n)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: NoteArgs{N: first + i}}
	}
	return params
}

// InsertNotes inserts Notes(first, n) and fails the test on error.
func InsertNotes(t testing.TB, c *spool.Client, first, n int) {
	t.Helper()
	if _, err := c.InsertMany(context.Background(), Notes(first, n)); err != nil {
		t.Fatalf("insert %d jobs: %v", n, err)
	}
}

// ---- tests ----

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
		params[n-1].InsertOpts = nil
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

func testClaimOrder(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	// Inserted out of order: priority first, then run_at, then id.
	ids := map[string]int64{}
	ids["p5"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 5})
	ids["p0-late"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0})
	ids["p0-early"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, RunAt: past})
	ids["p0-late2"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, RunAt: time.Now().Add(-time.Millisecond)})
	ids["future"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Priority: 0, Delay: time.Hour})
	ids["otherq"] = insert(t, c, NoteArgs{}, &spool.InsertOpts{Queue: "other"})
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 3, Lease: time.Minute, ClaimID: "t"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(rows) != 3 || rows[0].ID != ids["p0-early"] || rows[1].ID != ids["p0-late2"] && rows[1].ID != ids["p0-late"] || rows[2].ID != ids["p0-late"] && rows[2].ID != ids["p0-late2"] {
		t.Fatalf("claim order: %v", rowIDs(rows))
	}
	for _, r := range rows {
		if r.State != backend.StateRunning || r.Attempt != 1 || r.Fence != 1 || r.LeasedUntil == nil || r.LeasedBy != "t" {
			t.Fatalf("claimed row: %+v", r)
		}
	}
	rows, err = be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 10, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != ids["p5"] {
		t.Fatalf("second claim: %v %v (want only p5: the future job waits)", rowIDs(rows), err)
	}
}

func rowIDs(rows []*backend.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// testNoJobRunsTwice runs many clients (as separate processes would) with
// many workers each over one store and audits every run.
func testNoJobRunsTwice(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const jobs = 4000
	const clients = 4
	var (
		mu   sync.Mutex
		runs = make(map[int]int, jobs)
		done atomic.Int64
		all  = make(chan struct{})
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		mu.Lock()
		runs[j.Args.N]++
		mu.Unlock()
		if done.Add(1) == jobs {
			close(all)
		}
		return nil
	}))
	params := Notes(0, jobs)
	producerClient := newClient(t, be, &spool.Config{Logger: quietLogger()})
	if _, err := producerClient.InsertMany(context.Background(), params[:jobs/2]); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < clients; i++ {
		cbe := be
		if i > 0 {
			cbe = h.Reopen(t, be)
		}
		cfg := fastConfig(ws, 16)
		cfg.Queues[spool.DefaultQueue] = spool.QueueConfig{MaxWorkers: 16, Prefetch: 7 * (i + 1)}
		start(t, newClient(t, cbe, cfg))
	}
	// The rest arrive while the clients work, in small batches.
	for i := jobs / 2; i < jobs; i += 100 {
		if _, err := producerClient.InsertMany(context.Background(), params[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	recv(t, all, "all jobs to run")
	deadline := time.Now().Add(15 * time.Second)
	for countStates(t, be)[backend.StateCompleted] != jobs {
		if time.Now().After(deadline) {
			t.Fatalf("states = %v, want %d completed", countStates(t, be), jobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := 0; n < jobs; n++ {
		if runs[n] != 1 {
			t.Fatalf("job %d ran %d times", n, runs[n])
		}
	}
	if got := done.Load(); got != jobs {
		t.Fatalf("%d runs for %d jobs", got, jobs)
	}
}

func testRetryThenSucceed(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Attempt < 3 {
			return fmt.Errorf("boom %d", j.Attempt)
		}
		if len(j.Errors) != 2 || j.Errors[1].Error != "boom 2" {
			return spool.Discard(fmt.Errorf("history not visible to the worker: %+v", j.Errors))
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 3 || len(j.Errors) != 2 || j.Errors[0].Error != "boom 1" || j.Errors[0].Attempt != 1 || j.Errors[0].At.IsZero() {
		t.Fatalf("after retries: attempt %d errors %+v", j.Attempt, j.Errors)
	}
}

type delayWorker struct {
	spool.Worker[NoteArgs]
	delay time.Duration
}

// NextRetry implements spool.WorkerNextRetry.
func (w delayWorker) NextRetry(*spool.Job[NoteArgs]) time.Duration { return w.delay }

func testRetryBackoff(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, delayWorker{
		Worker: spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return errors.New("fail") }),
		delay:  time.Hour,
	})
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	j := waitState(t, be, id, backend.StateRetryable)
	// run_at is the database's now plus the worker's backoff; the attempt
	// started before that now.
	wait := j.RunAt.Sub(*j.AttemptedAt)
	if wait < time.Hour || wait > time.Hour+time.Minute {
		t.Fatalf("retry scheduled %s after the attempt, want about 1h", wait)
	}
	if j.LeasedUntil != nil || j.FinalizedAt != nil || j.Attempt != 1 {
		t.Fatalf("retryable job: %+v", j)
	}
}

func testMaxAttemptsDiscards(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		runs.Add(1)
		return errors.New("always")
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 3})
	j := waitState(t, be, id, backend.StateDiscarded)
	if j.Attempt != 3 || len(j.Errors) != 3 || j.FinalizedAt == nil {
		t.Fatalf("discarded: attempt %d errors %d finalized %v", j.Attempt, len(j.Errors), j.FinalizedAt)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("ran %d times, want 3", n)
	}
}

func testSnooze(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if runs.Add(1) <= 2 {
			return spool.Snooze(10 * time.Millisecond)
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	j := waitState(t, be, id, backend.StateCompleted)
	// Snoozes use no attempt (MaxAttempts 1 still completes); fences advance.
	if j.Attempt != 1 || j.Fence != 3 || len(j.Errors) != 0 || runs.Load() != 3 {
		t.Fatalf("after snoozes: attempt %d fence %d errors %v runs %d", j.Attempt, j.Fence, j.Errors, runs.Load())
	}
	// A long snooze leaves the job scheduled.
	ws2 := spool.NewWorkers()
	spool.AddWorker(ws2, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return spool.Snooze(time.Hour) }))
	be2 := h.NewBackend(t)
	c2 := newClient(t, be2, fastConfig(ws2, 1))
	start(t, c2)
	id = insert(t, c2, NoteArgs{}, nil)
	j = waitState(t, be2, id, backend.StateScheduled)
	if j.Attempt != 0 || j.RunAt.Sub(*j.AttemptedAt) < time.Hour-time.Minute {
		t.Fatalf("snoozed job: %+v", j)
	}
}

func testCancelAndDiscardOutcomes(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		switch j.Args.Mode {
		case "cancel":
			return spool.Cancel(errors.New("no longer wanted"))
		case "discard":
			return spool.Discard(errors.New("hopeless"))
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 2))
	start(t, c)
	cid := insert(t, c, NoteArgs{Mode: "cancel"}, nil)
	did := insert(t, c, NoteArgs{Mode: "discard"}, nil)
	j := waitState(t, be, cid, backend.StateCancelled)
	if len(j.Errors) != 1 || j.Errors[0].Error != "no longer wanted" || j.FinalizedAt == nil {
		t.Fatalf("cancelled: %+v", j)
	}
	j = waitState(t, be, did, backend.StateDiscarded)
	if len(j.Errors) != 1 || j.Errors[0].Error != "hopeless" || j.Attempt != 1 {
		t.Fatalf("discarded: %+v", j)
	}
}

func testUndecodableArgs(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error { return nil }))
	c := newClient(t, be, fastConfig(ws, 1))
	// Written by another program with a payload that does not fit NoteArgs.
	id := insert(t, c, spool.RawArgs("note", json.RawMessage(`{"n": "not a number"}`)), nil)
	start(t, c)
	j := waitState(t, be, id, backend.StateDiscarded)
	if j.Attempt != 1 || len(j.Errors) != 1 {
		t.Fatalf("undecodable job: %+v", j)
	}
}

func testPanicRecorded(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "panic" && j.Attempt == 1 {
			panic("kaboom")
		}
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	pid := insert(t, c, NoteArgs{Mode: "panic"}, nil)
	j := waitState(t, be, pid, backend.StateCompleted)
	if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Error != "panic: kaboom" || j.Errors[0].Trace == "" {
		t.Fatalf("after panic: attempt %d errors %+v", j.Attempt, j.Errors)
	}
	// The worker loop goes on.
	waitState(t, be, insert(t, c, NoteArgs{}, nil), backend.StateCompleted)
}

type timeoutWorker struct{ spool.Worker[NoteArgs] }

// Timeout implements spool.WorkerTimeout.
func (timeoutWorker) Timeout(*spool.Job[NoteArgs]) time.Duration { return 50 * time.Millisecond }

func testTimeout(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	causes := make(chan error, 2)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, timeoutWorker{spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		<-ctx.Done()
		causes <- ctx.Err()
		return ctx.Err()
	})})
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	if err := recv(t, causes, "timeout"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx err = %v", err)
	}
	j := waitState(t, be, id, backend.StateDiscarded)
	if len(j.Errors) != 1 || !contains(j.Errors[0].Error, "timed out after 50ms") {
		t.Fatalf("timeout error: %+v", j.Errors)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

func testFencing(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, nil)
	claim := func(lease time.Duration) *backend.JobRow {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: lease, ClaimID: "t"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %v", rowIDs(rows), err)
		}
		return rows[0]
	}
	first := claim(time.Millisecond)
	// The lease ends by the database clock; rescue returns the job.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retried == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(2 * time.Millisecond)
	}
	second := claim(time.Minute)
	if second.ID != id || second.Fence != first.Fence+1 || second.Attempt != 2 {
		t.Fatalf("second claim: %+v", second)
	}
	// The first holder's late writes are all rejected, and change nothing.
	for _, o := range []backend.Outcome{backend.OutcomeComplete, backend.OutcomeRetry, backend.OutcomeCancel, backend.OutcomeRelease} {
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: first.Lease(), Outcome: o}}})
		if err != nil || len(res.Rejected) != 1 || res.Rejected[0] != first.Lease() {
			t.Fatalf("stale outcome %d: %+v %v", o, res, err)
		}
	}
	hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: []backend.LeaseRef{first.Lease(), second.Lease()}, Lease: time.Minute})
	if err != nil || len(hb.Lost) != 1 || hb.Lost[0] != first.Lease() {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if j := getJob(t, be, id); j.State != backend.StateRunning || j.Fence != second.Fence {
		t.Fatalf("job changed by a stale lease: %+v", j)
	}
	// A mixed batch applies the live lease and rejects only the stale one.
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
		{Lease: first.Lease(), Outcome: backend.OutcomeComplete},
		{Lease: second.Lease(), Outcome: backend.OutcomeComplete},
	}})
	if err != nil || len(res.Rejected) != 1 || res.Rejected[0] != first.Lease() {
		t.Fatalf("mixed batch: %+v %v", res, err)
	}
	if j := getJob(t, be, id); j.State != backend.StateCompleted {
		t.Fatalf("state %s after completion", j.State)
	}
	// A completed job never runs again.
	if rows, _ := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"}); len(rows) != 0 {
		t.Fatalf("completed job claimed again: %v", rowIDs(rows))
	}
}

// testReleaseLostClaim: the jobs of a claim whose caller never got the reply
// go back by claim id, attempt given back; other claims are untouched, and
// the lost claim's fence stays void.
func testReleaseLostClaim(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		insert(t, c, NoteArgs{N: i}, nil)
	}
	claim := func(id string, n int) []*backend.JobRow {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: n, Lease: time.Minute, ClaimID: id})
		if err != nil || len(rows) != n {
			t.Fatalf("claim %s: %d rows, %v", id, len(rows), err)
		}
		return rows
	}
	lost := claim("c#1", 3)
	kept := claim("c#2", 2)
	n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "c#1"})
	if err != nil || n != 3 {
		t.Fatalf("release: %d %v", n, err)
	}
	for _, r := range lost {
		j := getJob(t, be, r.ID)
		if j.State != backend.StateAvailable || j.Attempt != 0 || j.LeasedUntil != nil || j.LeasedBy != "" {
			t.Fatalf("released job: %+v", j)
		}
	}
	for _, r := range kept {
		if j := getJob(t, be, r.ID); j.State != backend.StateRunning || j.LeasedBy != "c#2" {
			t.Fatalf("job of another claim touched: %+v", j)
		}
	}
	again := claim("c#3", 3)
	if again[0].Fence != lost[0].Fence+1 || again[0].Attempt != 1 {
		t.Fatalf("reclaimed: fence %d (lost %d) attempt %d", again[0].Fence, lost[0].Fence, again[0].Attempt)
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: lost[0].Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(res.Rejected) != 1 {
		t.Fatalf("the lost claim's lease still writes: %+v %v", res, err)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "c#1"}); err != nil || n != 0 {
		t.Fatalf("second release: %d %v", n, err)
	}
}

func testHeartbeatKeepsLongJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	cfg := fastConfig(ws, 1)
	cfg.LeaseDuration = 500 * time.Millisecond
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	// Run past several lease lengths while the leader rescues every 50ms:
	// heartbeats must keep the lease.
	first := getJob(t, be, id).LeasedUntil
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := getJob(t, be, id)
		if j.State != backend.StateRunning {
			t.Fatalf("long job left running: %+v", j)
		}
		if j.LeasedUntil.Sub(*first) > 3*cfg.LeaseDuration {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease not extended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	j := waitState(t, be, id, backend.StateCompleted)
	if runs.Load() != 1 || j.Attempt != 1 {
		t.Fatalf("runs %d attempt %d", runs.Load(), j.Attempt)
	}
}

func testLostLeaseCancelsJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	causes := make(chan error, 1)
	started := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // returns "success" late: must be fenced out
	}))
	cfg := fastConfig(ws, 1)
	cfg.LeaseDuration = 300 * time.Millisecond
	warned := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "cancelled by a user", seen: warned})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	// A user cancels the running job: the worker's lease is gone, and the
	// warning says so.
	if _, err := c.JobCancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, causes, "cancellation"); !errors.Is(cause, spool.ErrLeaseLost) {
		t.Fatalf("cause = %v", cause)
	}
	if w := recv(t, warned, "a warning that names the cause"); !strings.Contains(w, fmt.Sprintf("job %d: cancelled by a user", id)) {
		t.Fatalf("warning %q does not name the job and its cause", w)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, be, id); j.State != backend.StateCancelled {
		t.Fatalf("the late success overwrote the cancellation: %s", j.State)
	}
}

func testRescue(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan *spool.Job[NoteArgs], 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- j
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	id := insert(t, c, NoteArgs{}, nil)
	// A "worker" claims the job and dies: no heartbeat, no completion.
	if rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: 200 * time.Millisecond, ClaimID: "dead-worker"}); err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v", err)
	}
	start(t, c)
	j := recv(t, ran, "rescued job to run")
	if j.ID != id || j.Attempt != 2 || len(j.Errors) != 1 || !contains(j.Errors[0].Error, "lease expired") || !contains(j.Errors[0].Error, "dead-worker") {
		t.Fatalf("rescued run: attempt %d errors %+v", j.Attempt, j.Errors)
	}
	waitState(t, be, id, backend.StateCompleted)
}

// testRescueKeepsPlace: a rescued job goes back where it was in the queue,
// ahead of jobs inserted while it was leased, so that recovery behind a
// backlog takes about a lease and a rescue, not the backlog's drain time.
// The place is the job's run time (its order key within a priority); the
// claim that follows takes the whole queue, since some strategies pick at
// random within a window, and must include the rescued job.
func testRescueKeepsPlace(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	first := insert(t, c, NoteArgs{N: 0}, nil)
	before, err := be.JobGet(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: 50 * time.Millisecond, ClaimID: "dead-worker"}); err != nil || len(rows) != 1 || rows[0].ID != first {
		t.Fatalf("claim: %v (%d rows)", err, len(rows))
	}
	// The backlog arrives while the job is leased, with run times before
	// the rescue.
	res, err := c.InsertMany(ctx, Notes(1, 50))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retried == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(5 * time.Millisecond)
	}
	after, err := be.JobGet(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !after.RunAt.Equal(before.RunAt) {
		t.Fatalf("rescue moved the job's run time from %v to %v; it must keep its place", before.RunAt, after.RunAt)
	}
	for _, r := range res {
		id := r.ID
		j, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !after.RunAt.Before(j.RunAt) && !after.RunAt.Equal(j.RunAt) {
			t.Fatalf("rescued job runs at %v, after backlog job %d at %v", after.RunAt, id, j.RunAt)
		}
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 100, Lease: time.Minute, ClaimID: "next"})
	if err != nil || len(rows) == 0 {
		t.Fatalf("claim after rescue: %v (%d rows)", err, len(rows))
	}
	for _, r := range rows {
		if r.ID == first {
			if r.Attempt != 2 {
				t.Fatalf("rescued job claimed at attempt %d, want 2", r.Attempt)
			}
			return
		}
	}
	t.Fatalf("a claim of the whole queue after the rescue does not include the rescued job %d", first)
}

func testRescueDiscards(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Millisecond, ClaimID: "x"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Discarded == 1 && res.Retried == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not rescued")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if j := getJob(t, be, id); j.State != backend.StateDiscarded || j.FinalizedAt == nil || len(j.Errors) != 1 {
		t.Fatalf("rescued at max attempts: %+v", j)
	}
}

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

// testCompleteTxHeartbeatQuiet: a heartbeat that comes after the handler's
// CompleteTx committed, while the handler still runs, finds the lease ended
// by that commit. That is the ordinary path: the handler is not cancelled
// and nothing warns about a lost lease.
func testCompleteTxHeartbeatQuiet(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	results := make(chan error, 1)
	ws := spool.NewWorkers()
	cfg := fastConfig(ws, 1)
	cfg.LeaseDuration = 300 * time.Millisecond
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		tx := h.BeginTx(t, be)
		if err := spool.CompleteTx(ctx, btx(tx), j); err != nil {
			_ = tx.Rollback(ctx)
			results <- err
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			results <- err
			return err
		}
		// Stay past three heartbeats (one every 100ms): none may cancel us.
		select {
		case <-ctx.Done():
			results <- fmt.Errorf("handler cancelled after its CompleteTx committed: %w", context.Cause(ctx))
		case <-time.After(cfg.LeaseDuration + 100*time.Millisecond):
			results <- nil
		}
		return nil
	}))
	warned := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "no longer held", seen: warned})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	if err := recv(t, results, "handler"); err != nil {
		t.Fatal(err)
	}
	waitState(t, be, id, backend.StateCompleted)
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-warned:
		t.Fatalf("warned on the CompleteTx path: %s", w)
	default:
	}
}

func testCompleteTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	txs := make(chan Tx, 1)
	results := make(chan error, 2)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		tx := h.BeginTx(t, be)
		err := spool.CompleteTx(ctx, btx(tx), j)
		results <- err
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if j.Args.Mode == "rollback" {
			_ = tx.Rollback(ctx)
			return errors.New("rolled back")
		}
		txs <- tx
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return errors.New("this error must be ignored: the job completed in its transaction")
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	if err := recv(t, results, "complete tx"); err != nil {
		t.Fatal(err)
	}
	recv(t, txs, "commit")
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("completed in tx: %+v", j)
	}
	// Rolled back: the completion goes with it and the job retries.
	id = insert(t, c, NoteArgs{Mode: "rollback"}, &spool.InsertOpts{MaxAttempts: 1})
	if err := recv(t, results, "complete tx"); err != nil {
		t.Fatal(err)
	}
	if j := waitState(t, be, id, backend.StateDiscarded); len(j.Errors) != 1 || j.Errors[0].Error != "rolled back" {
		t.Fatalf("rolled back completion: %+v", j)
	}
	// Outside a job context it is an error, not a panic.
	outside := h.BeginTx(t, be)
	defer func() { _ = outside.Rollback(context.Background()) }()
	if err := spool.CompleteTx(context.Background(), btx(outside), &spool.Job[NoteArgs]{JobRow: j}); err == nil {
		t.Fatal("CompleteTx outside a job succeeded")
	}
}

func testSoftStop(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan int64, 10)
	release := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.ID
		<-release
		return ctx.Err() // nil unless cancelled: a soft stop must not cancel
	}))
	cfg := fastConfig(ws, 2)
	cfg.Queues[spool.DefaultQueue] = spool.QueueConfig{MaxWorkers: 2, Prefetch: 10}
	c := newClient(t, be, cfg)
	InsertNotes(t, c, 0, 10)
	start(t, c)
	a, b := recv(t, started, "first job"), recv(t, started, "second job")
	// All 10 are claimed (2 running, 8 buffered) before we stop.
	deadline := time.Now().Add(10 * time.Second)
	for countStates(t, be)[backend.StateRunning] != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("not all claimed: %v", countStates(t, be))
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	// Buffered jobs go back at once, while the running two still run.
	deadline = time.Now().Add(10 * time.Second)
	for countStates(t, be)[backend.StateAvailable] != 8 {
		if time.Now().After(deadline) {
			t.Fatalf("buffered jobs not released: %v", countStates(t, be))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := recv(t, stopped, "stop"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{a, b} {
		if j := getJob(t, be, id); j.State != backend.StateCompleted {
			t.Fatalf("running job %d after soft stop: %s", id, j.State)
		}
	}
	rows, err := be.JobList(context.Background(), &backend.JobListParams{States: []backend.State{backend.StateAvailable}})
	if err != nil || len(rows) != 8 {
		t.Fatalf("released: %d %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Attempt != 0 || r.LeasedUntil != nil {
			t.Fatalf("released job kept its attempt or lease: %+v", r)
		}
	}
	if len(started) != 0 {
		t.Fatal("a buffered job started after stop began")
	}
}

func testHardStop(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan struct{}, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), spool.ErrClientStopping) {
			return spool.Discard(fmt.Errorf("wrong cause %v", context.Cause(ctx)))
		}
		return ctx.Err()
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	if err := c.StopAndCancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := getJob(t, be, id)
	if j.State != backend.StateRetryable || j.Attempt != 1 || len(j.Errors) != 1 || !contains(j.Errors[0].Error, "interrupted by client stop") {
		t.Fatalf("after hard stop: %+v", j)
	}
	if time.Until(j.RunAt) > time.Second {
		t.Fatalf("interrupted job waits for a backoff: run_at %v", j.RunAt)
	}
}

func testStopTimeoutEscalates(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan struct{}, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want deadline exceeded", err)
	}
	if j := getJob(t, be, id); j.State != backend.StateRetryable {
		t.Fatalf("state %s", j.State)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := c.Start(context.Background()); !errors.Is(err, spool.ErrAlreadyStarted) {
		t.Fatalf("restart: %v", err)
	}
}

// testStopStuckHandler: a handler that ignores its context does not hold a
// stop past its deadline. Stop returns about half a second after the
// deadline with an error naming the job; the job is set to retry after one
// lease with an error that says why; the handler's late return writes
// nothing and panics nothing.
func testStopStuckHandler(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	returned := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- struct{}{}
		<-release // ignores ctx
		defer close(returned)
		return nil
	}))
	cfg := fastConfig(ws, 2)
	lateReturn := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "after the client's stop gave up", seen: lateReturn})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begun := time.Now()
	err := c.Stop(ctx)
	took := time.Since(begun)
	if took > 1500*time.Millisecond {
		t.Fatalf("Stop took %s with a 100ms deadline; want it back within about half a second of the deadline", took)
	}
	var se *spool.StopTimeoutError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v (%T), want a *StopTimeoutError matching context.DeadlineExceeded", err, err)
	}
	if len(se.Jobs) != 1 || se.Jobs[0].ID != id || se.Jobs[0].Kind != "note" || se.Jobs[0].Attempt != 1 {
		t.Fatalf("stuck jobs = %+v, want job %d of kind note, attempt 1", se.Jobs, id)
	}
	if !contains(err.Error(), fmt.Sprintf("job %d", id)) {
		t.Fatalf("error does not name the job: %v", err)
	}
	j := getJob(t, be, id)
	if j.State != backend.StateRetryable || len(j.Errors) != 1 || !contains(j.Errors[0].Error, "ignores its context") {
		t.Fatalf("after the stop: state %s, errors %+v; want retryable with the stop's reason", j.State, j.Errors)
	}
	// The retry waits about a lease, so the stuck handler is unlikely to
	// overlap the next attempt.
	if wait := j.RunAt.Sub(j.Errors[0].At); wait < cfg.LeaseDuration-500*time.Millisecond {
		t.Fatalf("retry due %s after the stop, want about the lease (%s)", wait, cfg.LeaseDuration)
	}
	// The handler returns after the client stopped: nothing is written, no
	// panic (a send on the closed completer would crash the test binary).
	close(release)
	recv(t, returned, "stuck handler to return")
	recv(t, lateReturn, "the late outcome to be dropped")
	if j2 := getJob(t, be, id); j2.State != backend.StateRetryable || len(j2.Errors) != 1 {
		t.Fatalf("the late return changed the job: state %s, errors %+v", j2.State, j2.Errors)
	}
}

// testStopHurried: a stop without a deadline waits for a stuck handler; a
// second stop whose context ends makes both give up on it and return.
func testStopHurried(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- struct{}{}
		<-release // ignores ctx
		return nil
	}))
	cfg := fastConfig(ws, 1)
	stopping := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "spool client stopping", seen: stopping})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	first := make(chan error, 1)
	go func() { first <- c.Stop(context.Background()) }()
	recv(t, stopping, "the first stop to begin")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begun := time.Now()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second stop = %v, want its deadline", err)
	}
	if took := time.Since(begun); took > 1500*time.Millisecond {
		t.Fatalf("second stop took %s with a 100ms deadline", took)
	}
	var se *spool.StopTimeoutError
	if err := recv(t, first, "first stop"); !errors.As(err, &se) || len(se.Jobs) != 1 || se.Jobs[0].ID != id {
		t.Fatalf("first stop = %v, want a *StopTimeoutError naming job %d", err, id)
	}
}

// testTimeoutOverrun: a handler that ignores its context and runs past its
// timeout is recorded as such, not as a crash found by rescue when its lease
// ends.
func testTimeoutOverrun(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	release := make(chan struct{})
	defer close(release)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, timeoutWorker{spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Attempt == 1 {
			<-release // ignores ctx
		}
		return nil
	})})
	cfg := fastConfig(ws, 2)
	cfg.LeaseDuration = 600 * time.Millisecond
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	// The retry is written about a heartbeat interval after the 50ms
	// timeout, runs after one lease, and succeeds at attempt 2.
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 2 || len(j.Errors) != 1 {
		t.Fatalf("attempt %d errors %+v, want attempt 2 after one recorded error", j.Attempt, j.Errors)
	}
	if e := j.Errors[0].Error; !contains(e, "timed out after 50ms") || !contains(e, "ignores its context") || contains(e, "lease expired") {
		t.Fatalf("recorded error %q, want the timeout overrun, not a lease expiry", e)
	}
}

func testLeaderElection(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	elect := func(id string, ttl time.Duration) bool {
		ok, err := be.LeaderElect(ctx, &backend.LeaderElectParams{Name: "m", ClientID: id, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !elect("a", 200*time.Millisecond) || elect("b", time.Minute) || !elect("a", 200*time.Millisecond) {
		t.Fatal("a should lead and renew; b should not")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !elect("b", time.Minute) { // a's term ends by the database clock
		if time.Now().After(deadline) {
			t.Fatal("b never took over")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if elect("a", time.Minute) {
		t.Fatal("a took over a live term")
	}
	if err := be.LeaderResign(ctx, &backend.LeaderResignParams{Name: "m", ClientID: "a"}); err != nil {
		t.Fatal(err)
	}
	if elect("a", time.Minute) {
		t.Fatal("a resigning b's term freed it")
	}
	if err := be.LeaderResign(ctx, &backend.LeaderResignParams{Name: "m", ClientID: "b"}); err != nil {
		t.Fatal(err)
	}
	if !elect("a", time.Minute) {
		t.Fatal("a not elected after b resigned")
	}
}

func testRetention(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		if j.Args.Mode == "fail" {
			return spool.Discard(errors.New("x"))
		}
		return nil
	}))
	// Delete on completion.
	cfg := fastConfig(ws, 2)
	cfg.CompletedRetention = -1
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := be.JobGet(ctx, id)
		if errors.Is(err, backend.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed job not deleted: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	did := insert(t, c, NoteArgs{Mode: "fail"}, nil)
	waitState(t, be, did, backend.StateDiscarded)
	// Cleanup by age: a young discarded job stays; with a tiny age it goes.
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Hour, DiscardedAge: time.Hour, CancelledAge: time.Hour})
	if err != nil || n != 0 {
		t.Fatalf("cleanup removed %d young jobs (%v)", n, err)
	}
	pending := insert(t, c, NoteArgs{}, &spool.InsertOpts{Delay: time.Hour})
	deadline = time.Now().Add(10 * time.Second)
	for {
		n, err = be.JobCleanup(ctx, &backend.JobCleanupParams{DiscardedAge: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("old discarded job not cleaned")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := be.JobGet(ctx, pending); err != nil {
		t.Fatalf("cleanup touched a pending job: %v", err)
	}
}

func testQueueConcurrency(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	var (
		cur, peak atomic.Int32
		done      = make(chan struct{}, 100)
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // hold the slot so overlap can show
		cur.Add(-1)
		done <- struct{}{}
		return nil
	}))
	cfg := fastConfig(ws, 3)
	cfg.Queues["slow"] = spool.QueueConfig{MaxWorkers: 1}
	c := newClient(t, be, cfg)
	InsertNotes(t, c, 0, 60)
	start(t, c)
	for range 60 {
		recv(t, done, "job")
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..3 with MaxWorkers 3", p)
	}
}

func testDelayedJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan time.Time, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran <- time.Now()
		return nil
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	inserted := time.Now()
	id := insert(t, c, NoteArgs{}, &spool.InsertOpts{Delay: 300 * time.Millisecond})
	at := recv(t, ran, "delayed job")
	if d := at.Sub(inserted); d < 250*time.Millisecond {
		t.Fatalf("delayed job ran after %s", d)
	}
	waitState(t, be, id, backend.StateCompleted)
}

// testStartStopStress starts and stops clients over and over, soft and hard,
// while jobs are inserted and worked; under -race this finds unsafe shutdown
// paths. No job may be lost: at the end a last client completes them all.
func testStartStopStress(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const rounds = 12
	const perRound = 40
	var ran atomic.Int64
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		ran.Add(1)
		if j.Args.N%3 == 0 {
			select { // some jobs take a moment, so stops catch them running
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	ctx := context.Background()
	n := 0
	for round := 0; round < rounds; round++ {
		cfg := fastConfig(ws, 1+round%4)
		cfg.Queues[spool.DefaultQueue] = spool.QueueConfig{MaxWorkers: 1 + round%4, Prefetch: round % 5}
		c := newClient(t, be, cfg)
		if err := c.Start(ctx); err != nil {
			t.Fatalf("round %d: start: %v", round, err)
		}
		InsertNotes(t, c, n, perRound)
		n += perRound
		var err error
		if round%2 == 0 {
			err = c.Stop(ctx)
		} else {
			err = c.StopAndCancel(ctx)
		}
		if err != nil {
			t.Fatalf("round %d: stop: %v", round, err)
		}
		// Stopping twice, concurrently, is safe.
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.Stop(ctx) }()
		}
		wg.Wait()
		if got := countStates(t, be)[backend.StateRunning]; got != 0 {
			t.Fatalf("round %d: %d jobs left running after a stop", round, got)
		}
	}
	c := newClient(t, be, fastConfig(ws, 4))
	start(t, c)
	deadline := time.Now().Add(15 * time.Second)
	for countStates(t, be)[backend.StateCompleted] != int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("states %v, want %d completed", countStates(t, be), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ran.Load() < int64(n) {
		t.Fatalf("%d runs for %d jobs", ran.Load(), n)
	}
}

// testLocalWake: with polling an hour apart, a delayed job inserted by this
// client and a retry it wrote must still run when due: the client wakes its
// own producer for due times it knows.
func testLocalWake(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ran := make(chan NoteArgs, 4)
	ws := spool.NewWorkers()
	spool.AddWorker[NoteArgs](ws, delayWorker{
		Worker: spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
			ran <- j.Args
			if j.Args.Mode == "fail-once" && j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}),
		delay: 200 * time.Millisecond,
	})
	cfg := fastConfig(ws, 2)
	cfg.PollInterval = time.Hour
	c := newClient(t, be, cfg)
	start(t, c)
	delayed := insert(t, c, NoteArgs{N: 1}, &spool.InsertOpts{Delay: 200 * time.Millisecond})
	if a := recv(t, ran, "delayed job"); a.N != 1 {
		t.Fatalf("ran %+v", a)
	}
	waitState(t, be, delayed, backend.StateCompleted)
	retried := insert(t, c, NoteArgs{N: 2, Mode: "fail-once"}, nil)
	recv(t, ran, "first attempt")
	recv(t, ran, "retry after 200ms")
	if j := waitState(t, be, retried, backend.StateCompleted); j.Attempt != 2 {
		t.Fatalf("retried job: %+v", j)
	}
	// A later due time known first, then an earlier one: both must fire.
	later := insert(t, c, NoteArgs{N: 3}, &spool.InsertOpts{Delay: 700 * time.Millisecond})
	insert(t, c, NoteArgs{N: 4, Mode: "fail-once"}, nil)
	seen := map[int]int{}
	for len(seen) < 2 || seen[4] < 2 {
		seen[recv(t, ran, "the later delayed job and the earlier retry").N]++
	}
	waitState(t, be, later, backend.StateCompleted)
}
