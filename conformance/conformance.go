// Package conformance is the conformance suite every Spool backend passes,
// the built-in ones and any other: a backend's own tests call Run with a
// Harness that makes fresh stores. The suite drives the public client API
// (and the backend interface directly where the contract is about the store)
// against a fresh store per test. Its files follow the subjects of the
// contract: insert, claim, outcomes, leases, maintenance, wakeups, admin,
// stop, inputs (edge values) and limits (docs/limits.md restated).
package conformance

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
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
	// NewUnmigrated returns a backend on a fresh store that was never
	// migrated (an empty database, or a schema that does not exist yet),
	// cleaned up when the test ends; the test migrates it through the
	// backend. A store with no schema to migrate (one in memory) leaves it
	// nil and names InsertUnmigrated in Exceptions, with that reason.
	NewUnmigrated func(t *testing.T) backend.Backend
	// HoldClaims returns be with each claim passing gate after it ran
	// (ClaimGate.Pass), as a reply that load delays would; be's optional
	// interfaces (a Notifier, a Waker) must stay visible, so the wrapper
	// embeds the store's own type. ResumeWithClaimInFlight needs it.
	HoldClaims func(be backend.Backend, gate *ClaimGate) backend.Backend
	// Lock takes, from another session, a lock that be's claims, finishes,
	// heartbeats and inserts wait behind (CallsHonourCancel); nil for a
	// store where no session can hold up another's calls (one in memory,
	// whose calls take its mutex for microseconds).
	Lock func(t *testing.T, be backend.Backend) StoreLock
	// Exceptions names the tests of guarantees the backend documents it
	// does not give, each with the reason. They are skipped with that
	// reason; a name that is no test fails the run. A backend whose
	// guarantees hold per store (Spread) names them there instead, and
	// their per-store variants run.
	Exceptions map[string]string
	// Spread, when not nil, says that the backend spreads one queue's jobs
	// over several stores that each decide claims on their own (a sharded
	// backend placing jobs by key). The tests it names run their per-store
	// variant.
	Spread *Spread
	// Slow, for a store that is slow by design (an embedded engine that
	// sorts its collection for every claim), runs the load tests
	// (NoJobRunsTwice, StartStopStress) with a tenth of their jobs; what
	// they assert is unchanged.
	Slow bool

	// perStore is set, for one test, when it runs its per-store variant.
	perStore bool
}

// Spread describes a backend that spreads a queue over several stores:
// where each job is, and which tests' guarantees hold per store. A test
// named in PerStore asserts, instead of its whole-queue guarantee, what
// holds on each store, and what holds for the whole queue when all its jobs
// are on one store (one flow key's jobs are). No test is skipped.
type Spread struct {
	// StoreOf returns the store that holds job id.
	StoreOf func(be backend.Backend, id int64) int
	// KeyStore returns the store that holds the jobs of a flow key.
	KeyStore func(be backend.Backend, key string) int
	// PerStore names the tests whose guarantee holds per store, each with
	// the reason, logged when it runs. A name that is not a test with a
	// per-store variant fails the run.
	PerStore map[string]string
}

// perStoreVariants are the tests that have a per-store variant.
var perStoreVariants = map[string]bool{
	"ClaimOrder": true, "FlowGlobalLimit": true, "FlowWideLimits": true, "FlowQuickClaim": true,
	"FlowKilledWorkerSlotsReturn": true, "FlowFairShare": true, "FlowFairSmallNotStarved": true,
}

// loadJobs is n, or a tenth of it for a Slow store.
func (h Harness) loadJobs(n int) int {
	if h.Slow {
		return max(n/10, 1)
	}
	return n
}

// spread returns h.Spread when the running test is to assert its per-store
// variant, else nil.
func (h Harness) spread() *Spread {
	if !h.perStore {
		return nil
	}
	return h.Spread
}

// Run runs every conformance test.
func Run(t *testing.T, h Harness) {
	tests := []namedTest{
		{"InsertAndWork", testInsertAndWork},
		{"CrossProcessWake", testCrossProcessWake},
		{"WakesAcrossProcesses", testWakesAcrossProcesses},
		{"ListNewestAndBounds", testListNewestAndBounds},
		{"DeleteJob", testDeleteJob},
		{"Throughput", testThroughput},
		{"InsertOptions", testInsertOptions},
		{"InsertBadInput", testInsertBadInput},
		{"InsertManyAllOrNothing", testInsertManyAllOrNothing},
		{"InsertManyFast", testInsertManyFast},
		{"InsertTxRollbackNeverRuns", testInsertTxRollback},
		{"InsertTxInvisibleUntilCommit", testInsertTxInvisibleUntilCommit},
		{"InsertUnmigrated", testInsertUnmigrated},
		{"ClaimOrder", testClaimOrder},
		{"NoJobRunsTwice", testNoJobRunsTwice},
		{"RetryThenSucceed", testRetryThenSucceed},
		{"RetryBackoffUsesDatabaseClock", testRetryBackoff},
		{"MaxAttemptsDiscards", testMaxAttemptsDiscards},
		{"Snooze", testSnooze},
		{"CancelAndDiscardOutcomes", testCancelAndDiscardOutcomes},
		{"FinishManyMixedOutcomes", testFinishManyMixed},
		{"UndecodableArgsDiscarded", testUndecodableArgs},
		{"PanicRecorded", testPanicRecorded},
		{"Timeout", testTimeout},
		{"FencingRejectsStaleLease", testFencing},
		{"ReleaseLostClaim", testReleaseLostClaim},
		{"HeartbeatKeepsLongJob", testHeartbeatKeepsLongJob},
		{"HeartbeatNeverShortensLease", testHeartbeatNeverShortens},
		{"LostLeaseCancelsJob", testLostLeaseCancelsJob},
		{"LostLeaseSlowRead", testLostLeaseSlowRead},
		{"RescueExpiredLease", testRescue},
		{"RescueDiscardsAtMaxAttempts", testRescueDiscards},
		{"RescueKeepsPlaceInQueue", testRescueKeepsPlace},
		{"CancelPendingAndRunning", testCancelJob},
		{"RetryDiscardedJob", testRetryDiscarded},
		{"CompleteTxExactlyOnce", testCompleteTx},
		{"CompleteTxThenHeartbeatQuiet", testCompleteTxHeartbeatQuiet},
		{"CompleteTxLookupFails", testCompleteTxLookupFails},
		{"SoftStopFinishesRunningReleasesBuffered", testSoftStop},
		{"HardStopCancelsRunning", testHardStop},
		{"StopTimeoutEscalates", testStopTimeoutEscalates},
		{"StopReturnsWithStuckHandler", testStopStuckHandler},
		{"StopWithoutDeadlineHurriedByLaterStop", testStopHurried},
		{"CallsHonourCancel", testCallsHonourCancel},
		{"TimeoutOverrunRecorded", testTimeoutOverrun},
		{"TimeoutOverrunWriteFails", testTimeoutOverrunWriteFails},
		{"LeaderElection", testLeaderElection},
		{"PeriodicRecords", testPeriodicRecords},
		{"PeriodicFirstStart", testPeriodicFirstStart},
		{"Retention", testRetention},
		{"QueueConcurrencyLimit", testQueueConcurrency},
		{"DelayedJob", testDelayedJob},
		{"LocalWakeForDelaysAndRetries", testLocalWake},
		{"PauseStopsClaims", testPauseStopsClaims},
		{"PauseRunningClient", testPauseRunningClient},
		{"PauseReleasesPrefetched", testPauseReleasesPrefetched},
		{"ResumeWithClaimInFlight", testResumeWithClaimInFlight},
		{"StartStopStress", testStartStopStress},
		{"UniqueInsert", testUniqueInsert},
		{"UniqueStates", testUniqueStates},
		{"UniqueConcurrentInserts", testUniqueConcurrent},
		{"UniqueTxRollback", testUniqueTxRollback},
		{"DebounceMoves", testDebounceMoves},
		{"DebounceNewCycle", testDebounceNewCycle},
		{"DebounceConcurrentInserts", testDebounceConcurrent},
		{"DebounceTx", testDebounceTx},
		{"DebounceEarlierCycleRetry", testDebounceEarlierCycleRetry},
		{"AwaitOtherProcess", testAwaitOtherProcess},
		{"SubscribeAll", testSubscribeAll},
		{"FinishedFeedPages", testFinishedFeedPages},
		{"BulkActions", testBulkActions},
		{"CancelReachesOtherProcess", testCancelReachesOtherProcess},
		{"Events", testEvents},
		{"TestHelpers", testHelpers},
		{"OutputAndMetadata", testOutputAndMetadata},
		{"FlowGlobalLimit", testFlowGlobalLimit},
		{"FlowWideLimits", testFlowWideLimits},
		{"FlowQuickClaim", testFlowQuickClaim},
		{"FlowKilledWorkerSlotsReturn", testFlowKilledWorkerSlotsReturn},
		{"FlowKeyLimit", testFlowKeyLimit},
		{"FlowRateLimit", testFlowRateLimit},
		{"FlowOrderBlock", testFlowOrderBlock},
		{"FlowOrderStepAside", testFlowOrderStepAside},
		{"FlowFairShare", testFlowFairShare},
		{"FlowFairSmallNotStarved", testFlowFairSmallNotStarved},
		{"FlowKeysAndInput", testFlowKeysAndInput},
		{"FlowRateStatesPruned", testFlowRateStatesPruned},
	}
	tests = append(tests, inputEdgeTests()...)
	tests = append(tests, manyTests()...)
	tests = append(tests, stepTests()...)
	tests = append(tests, outcomeStepTests()...)
	tests = append(tests, workflowTests()...)
	known := map[string]bool{}
	for _, tc := range tests {
		known[tc.name] = true
	}
	for name := range h.Exceptions {
		if !known[name] {
			t.Errorf("exception %q names no conformance test", name)
		}
	}
	if h.Spread != nil {
		for name := range h.Spread.PerStore {
			if !perStoreVariants[name] {
				t.Errorf("per-store guarantee %q names no conformance test with a per-store variant", name)
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if reason, ok := h.Exceptions[tc.name]; ok {
				t.Skip("documented exception: " + reason)
			}
			t.Parallel()
			// Bounded apart from -parallel (GOMAXPROCS by default): each
			// test's connections come from a database server shared with
			// other processes, and a test holds up to three handles.
			running <- struct{}{}
			defer func() { <-running }()
			h := h
			if h.Spread != nil {
				if reason, ok := h.Spread.PerStore[tc.name]; ok {
					t.Logf("asserting the per-store guarantee: %s", reason)
					h.perStore = true
				}
			}
			tc.fn(t, h)
		})
	}
}

// MaxParallel is how many conformance tests of one process run at once,
// whatever -parallel says: a bound on the connections the suite takes from
// a database server shared with other processes (docs/testing.md).
const MaxParallel = 4

// running holds a place for each conformance test running.
var running = make(chan struct{}, MaxParallel)

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

// quietLogger is the logger of the suite's clients: their warnings and
// errors, shown only if the test fails (TestLogger).
func quietLogger(t testing.TB) *slog.Logger { return TestLogger(t, slog.LevelWarn) }

// LogBuffer is a bytes.Buffer safe for concurrent writers: the output of a
// client's logger, which its goroutines write to, read by a test.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fastConfig returns a config with short intervals for tests, and a long
// lease: a lease's end is the subject of a few tests only, which set
// shortLease themselves. With a short lease every test depends on the
// machine's speed: a process starved for two seconds on a loaded machine
// (a CI run at load 25 saw heartbeats take 1.4 s and a claim's reply
// 0.9 s) has its leases end, and its jobs released unstarted or run again,
// in tests whose subject is signals, flow limits or records.
func fastConfig(ws *spool.Workers, workers int) *spool.Config {
	return &spool.Config{
		Workers:        ws,
		Queues:         map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: workers}},
		LeaseDuration:  time.Minute,
		PollInterval:   20 * time.Millisecond,
		RescueInterval: 50 * time.Millisecond,
		RetryPolicy:    spool.ConstantRetryPolicy{Delay: 0},
		// Logger: newClient gives the test's (quietLogger).
	}
}

// shortLease is the lease of the tests whose subject is a lease's end: a
// heartbeat's rhythm (a beat every second), rescue of a job whose handler
// was abandoned, a retry delayed by one lease. The lease holds while the
// test's process is starved for less than about two seconds.
const shortLease = 3 * time.Second

func newClient(t *testing.T, be backend.Backend, cfg *spool.Config) *spool.Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger(t)
	}
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

// awaitProgress waits for ch to receive while count keeps growing: it
// fails when count has not moved for 15 s (what stalled).
func awaitProgress[T any](t *testing.T, ch <-chan T, count func() int64, what string) T {
	t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, since := count(), time.Now()
	for {
		select {
		case v := <-ch:
			return v
		case now := <-tick.C:
			if n := count(); n != last {
				t.Logf("waiting for %s: %d so far", what, n)
				last, since = n, now
			} else if now.Sub(since) >= 15*time.Second {
				t.Fatalf("timed out waiting for %s: no progress for 15 s, stuck at %d", what, n)
			}
		}
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

// TestLogger returns a logger for the clients and backends of test t that
// keeps their records from level up and shows them through t.Log only if
// t fails, so that a passing run is quiet and a failing one shows what the
// clients said. $SPOOL_TEST_LOG=1 keeps every level.
func TestLogger(t testing.TB, level slog.Level) *slog.Logger {
	if os.Getenv("SPOOL_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(ShownOnFailure(t, "client logs"), &slog.HandlerOptions{Level: level}))
}

// ShownOnFailure returns a writer (for a client's log, or a child
// process's stderr) whose text t.Log shows, under the title what, only if
// t fails. What is written after t ended is dropped.
func ShownOnFailure(t testing.TB, what string) *LogBuffer {
	buf := &LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			if s := buf.String(); s != "" {
				t.Logf("%s:\n%s", what, s)
			}
		}
	})
	return buf
}

// Warnings is a slog.Handler that keeps the text of every warning (and
// worse), message and attributes, and closes First when the first comes:
// for tests that wait for a client to say why it retries.
type Warnings struct {
	mu    sync.Mutex
	lines []string
	first chan struct{}
	once  sync.Once
}

// NewWarnings returns an empty Warnings.
func NewWarnings() *Warnings { return &Warnings{first: make(chan struct{})} }

// First is closed when the first warning is handled.
func (w *Warnings) First() <-chan struct{} { return w.first }

// Text returns the warnings so far, one a line.
func (w *Warnings) Text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// Enabled implements slog.Handler: warnings and errors.
func (w *Warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// Handle implements slog.Handler.
func (w *Warnings) Handle(_ context.Context, r slog.Record) error {
	line := recordText(r)
	w.mu.Lock()
	w.lines = append(w.lines, line)
	w.mu.Unlock()
	w.once.Do(func() { close(w.first) })
	return nil
}

// WithAttrs implements slog.Handler; the attributes are dropped.
func (w *Warnings) WithAttrs([]slog.Attr) slog.Handler { return w }

// WithGroup implements slog.Handler; the group is dropped.
func (w *Warnings) WithGroup(string) slog.Handler { return w }
