package mongo_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/256dpi/lungo"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mongo"
	"github.com/spoolq/spool/conformance"
)

// engines maps each backend the harness made to its embedded engine, so
// that Reopen can give another client handle on it: a second process.
var engines sync.Map // *mongo.Backend → *lungo.Engine

// newEngine returns a backend on a fresh embedded engine, closed when the
// test ends, migrated when migrate is set.
func newEngine(t *testing.T, migrate bool) backend.Backend {
	t.Helper()
	be, engine, err := mongo.OpenEngine(context.Background(), "spool", mongo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engine.Close)
	engines.Store(be, engine)
	t.Cleanup(func() { engines.Delete(be) })
	if migrate {
		if err := be.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return be
}

// noTx is the harness's transaction: the backend refuses it.
type noTx struct{}

func (noTx) Commit(context.Context) error   { return nil }
func (noTx) Rollback(context.Context) error { return nil }

func harness() conformance.Harness {
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return newEngine(t, true) },
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			e, ok := engines.Load(be)
			if !ok {
				t.Fatal("reopen: the backend was not made by the harness")
			}
			other := mongo.New(lungo.NewClient(e.(*lungo.Engine)), "spool", mongo.Options{})
			engines.Store(other, e)
			t.Cleanup(func() { engines.Delete(other) })
			return other
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldClaims{be.(*mongo.Backend), gate}
		},
		// The backend refuses every caller transaction (ErrTxType): the
		// tests of transactions are exceptions, and InsertUnmigrated,
		// which passes one to an unmigrated store, gets the schema error
		// first.
		BeginTx:       func(t *testing.T, be backend.Backend) conformance.Tx { return noTx{} },
		NewUnmigrated: func(t *testing.T) backend.Backend { return newEngine(t, false) },
		Exceptions:    exceptions(),
		// Every claim sorts the whole collection on lungo's engine.
		Slow: true,
	}
}

// exceptions are the guarantees the backend does not give, each with its
// reason (docs/mongo.md, "What it does not do").
func exceptions() map[string]string {
	const (
		tx       = "caller transactions are not supported: lungo's engine holds its one write token for a transaction's whole length, and a MongoDB server needs a replica set for them"
		flow     = "flow control is not supported: a flow claim reads the queue's running jobs and takes new ones under one lock, which needs a multi-document transaction"
		workflow = "workflows and batches are not supported: a finish must settle the dependents in the same atomic write, which needs a multi-document transaction"
		steps    = "durable steps, waits and signals are not supported: a step is recorded only while its job's lease holds, in one atomic write across two documents"
		debounce = "debounce is not supported: the inserts of a key must be serialised through a key document and the job's run time moved in one transaction"
	)
	ex := map[string]string{}
	for _, n := range []string{"InsertTxRollbackNeverRuns", "InsertTxInvisibleUntilCommit", "CompleteTxExactlyOnce",
		"CompleteTxThenHeartbeatQuiet", "CompleteTxLookupFails", "UniqueTxRollback", "ManyCompleteManyTx",
		"InsertManyFast", "TestHelpers"} {
		ex[n] = tx
	}
	for _, n := range []string{"FlowGlobalLimit", "FlowWideLimits", "FlowQuickClaim", "FlowKilledWorkerSlotsReturn",
		"FlowKeyLimit", "FlowRateLimit", "FlowOrderBlock", "FlowOrderStepAside", "FlowFairShare",
		"FlowFairSmallNotStarved", "FlowKeysAndInput", "FlowRateStatesPruned", "ManyFlowLimit"} {
		ex[n] = flow
	}
	for _, n := range []string{"WorkflowWaitingNeverClaimed", "WorkflowDiamondOutputs", "WorkflowRefusedWritesNothing",
		"WorkflowFailurePolicy", "WorkflowCancelAndRetention", "WorkflowTx", "WorkflowFlowRules",
		"BatchCallbacks", "BatchOpenAndSeal", "BatchCallbackExactlyOnce", "WorkflowDeleteKeepsWaitedOn", "WorkflowRetry"} {
		ex[n] = workflow
	}
	for _, n := range []string{"StepRecordedNotRerunAfterRetry", "StepStaleFenceCannotRecord", "StepNotRerunAfterCrashRescue",
		"StepTxRollbackLeavesNoStep", "StepNamesChecked", "SleepFreesWorkerAndWaitsItsTime", "SignalBeforeWaitKept",
		"SignalFirstWins", "SignalWakesWaiterNoneLost", "SignalTimeoutError", "StepsWrittenBehindBeforeOutcomeAndWait",
		"WaitWrittenWhenHandlerReturns", "RecordsGoWithJobDeletedAtCompletion", "RecordsGoWithJobDeleted"} {
		ex[n] = steps
	}
	for _, n := range []string{"DebounceMoves", "DebounceNewCycle", "DebounceConcurrentInserts", "DebounceTx", "DebounceEarlierCycleRetry"} {
		ex[n] = debounce
	}
	return ex
}

// TestConformance runs the conformance suite on lungo's embedded engine;
// each Reopen is another client handle on one engine, standing in for
// another process.
func TestConformance(t *testing.T) { conformance.Run(t, harness()) }

// dbSeq names the databases of the server test.
var dbSeq atomic.Int64

// TestConformanceServer runs the suite against the MongoDB server at
// $SPOOL_TEST_MONGO_URL (a replica set is not needed: nothing here uses a
// transaction), one database per test, dropped at its end.
func TestConformanceServer(t *testing.T) {
	url := os.Getenv("SPOOL_TEST_MONGO_URL")
	if url == "" {
		t.Skip("SPOOL_TEST_MONGO_URL is not set: no MongoDB server can be installed on the CI machines, so the suite runs on lungo's engine (TestConformance) and this server run is for a machine that has one")
	}
	ctx := context.Background()
	clients := map[backend.Backend]string{}
	var mu sync.Mutex
	open := func(t *testing.T, migrate bool) backend.Backend {
		name := fmt.Sprintf("spool_test_%d_%d", os.Getpid(), dbSeq.Add(1))
		be, err := mongo.Dial(ctx, url, name, mongo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = be.DropDatabase(context.Background())
			_ = be.Close()
		})
		if migrate {
			if err := be.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		clients[be] = name
		mu.Unlock()
		return be
	}
	h := harness()
	h.NewBackend = func(t *testing.T) backend.Backend { return open(t, true) }
	h.NewUnmigrated = func(t *testing.T) backend.Backend { return open(t, false) }
	h.Reopen = func(t *testing.T, be backend.Backend) backend.Backend {
		mu.Lock()
		name := clients[be]
		mu.Unlock()
		other, err := mongo.Dial(ctx, url, name, mongo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Close() })
		mu.Lock()
		clients[other] = name
		mu.Unlock()
		return other
	}
	conformance.Run(t, h)
}

// heldClaims is a MongoDB backend whose claims pass a conformance.ClaimGate
// (Harness.HoldClaims); the embedded backend keeps its optional interfaces.
type heldClaims struct {
	*mongo.Backend
	*conformance.ClaimGate
}

func (h heldClaims) JobClaim(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	rows, err := h.Backend.JobClaim(ctx, p)
	h.Pass()
	return rows, err
}
