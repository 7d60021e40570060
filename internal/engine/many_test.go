package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// manyArgs is the args of the jobs of these tests.
type manyArgs struct {
	Group string `json:"group"`
}

// manyCallRec is one call as a test handler saw it.
type manyCallRec struct {
	groups []string
	at     time.Time
}

// manyEngine starts an engine over a memory store whose one queue has
// workers slots and whose kind "many" is worked many jobs per call under
// rules by a handler that records each call and completes its jobs.
func manyEngine(t *testing.T, workers int, rules ManyRules) (*memory.Backend, chan manyCallRec) {
	t.Helper()
	be := memory.New()
	calls := make(chan manyCallRec, 100)
	rules.GroupKey = func(row *backend.JobRow) string {
		var a manyArgs
		_ = json.Unmarshal(row.Args, &a)
		return a.Group
	}
	h := Handler{
		Run:     func(context.Context, *backend.JobRow) error { return errors.New("single run of a many kind") },
		Timeout: func(*backend.JobRow) time.Duration { return 0 },
		NextRetry: func(*backend.JobRow) (time.Duration, bool) {
			return 0, false
		},
		RunMany: func(ctx context.Context, rows []*backend.JobRow) []error {
			rec := manyCallRec{at: time.Now()}
			for _, r := range rows {
				var a manyArgs
				_ = json.Unmarshal(r.Args, &a)
				rec.groups = append(rec.groups, a.Group)
			}
			calls <- rec
			return make([]error, len(rows))
		},
	}
	e := New(be, Config{
		ClientID:           "many-test",
		LeaseDuration:      10 * time.Second,
		PollInterval:       20 * time.Millisecond,
		FlowPollInterval:   20 * time.Millisecond,
		CompletionBatchMax: 100,
		JobTimeout:         time.Minute,
		Queues:             map[string]Queue{"q": {MaxWorkers: workers, Prefetch: workers}},
		Handler: func(kind string) (Handler, bool) {
			return h, kind == "many"
		},
		Many: func(kind string) *ManyRules {
			if kind == "many" {
				return &rules
			}
			return nil
		},
		NextRetry: func(int) time.Duration { return 0 },
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx, false); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return be, calls
}

// insertGroups inserts one job of kind "many" per group named, in one
// statement.
func insertGroups(t *testing.T, be backend.Backend, groups ...string) {
	t.Helper()
	jobs := make([]*backend.JobInsertParams, len(groups))
	for i, g := range groups {
		args, _ := json.Marshal(manyArgs{Group: g})
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "many", Args: args, MaxAttempts: 5}
	}
	if _, err := be.JobInsertMany(context.Background(), &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
}

func recvCall(t *testing.T, calls <-chan manyCallRec) manyCallRec {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call")
		panic("unreachable")
	}
}

// Calls take up to MaxJobs jobs of one group key; a group that does not
// fill waits MaxWait from its first job's arrival, not longer.
func TestManyGroupsFillOrWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	be, calls := manyEngine(t, 50, ManyRules{MaxJobs: 3, MaxWait: wait})
	inserted := time.Now()
	insertGroups(t, be, "x", "x", "y", "x", "x", "x", "x", "x")
	sizes := map[string][]int{}
	for n := 0; n < 8; {
		c := recvCall(t, calls)
		for _, g := range c.groups[1:] {
			if g != c.groups[0] {
				t.Fatalf("a call mixes groups: %v", c.groups)
			}
		}
		full := len(c.groups) == 3
		if took := c.at.Sub(inserted); !full && took < wait {
			t.Fatalf("a call of %d jobs (%v) started %s after the insert, before MaxWait %s", len(c.groups), c.groups, took, wait)
		}
		sizes[c.groups[0]] = append(sizes[c.groups[0]], len(c.groups))
		n += len(c.groups)
	}
	if got := sizes["x"]; len(got) != 3 || got[0] != 3 || got[1] != 3 || got[2] != 1 {
		t.Fatalf("calls of group x: %v, want [3 3 1]", got)
	}
	if got := sizes["y"]; len(got) != 1 || got[0] != 1 {
		t.Fatalf("calls of group y: %v, want [1]", got)
	}
}

// With no worker slot free no job can join a group: its call starts at
// once rather than wait out MaxWait.
func TestManyNoFreeSlotStartsAtOnce(t *testing.T) {
	be, calls := manyEngine(t, 2, ManyRules{MaxJobs: 10, MaxWait: time.Hour})
	insertGroups(t, be, "x", "x", "x", "x")
	for n := 0; n < 4; {
		c := recvCall(t, calls)
		if len(c.groups) > 2 {
			t.Fatalf("a call of %d jobs in a queue of 2 slots", len(c.groups))
		}
		n += len(c.groups)
	}
}

// A many-call's context ends with the last of its jobs' contexts, with
// that job's cause; one job's cancellation ends that job's context only.
func TestManyCallContextEndsWithItsJobs(t *testing.T) {
	running := newRunningJobs()
	call := &manyCall{}
	callCtx, cancelCall := context.WithCancelCause(context.Background())
	call.cancel = cancelCall
	var jobs []gatheredJob
	for id := int64(1); id <= 2; id++ {
		row := &backend.JobRow{ID: id, Fence: 1}
		jctx, cancel := newJobContext(context.Background(), nil, row, time.Time{}, 0)
		jctx.running = runningJob{lease: row.Lease(), ctx: jctx, cancel: cancel, gathered: true}
		running.add(&jctx.running)
		jobs = append(jobs, gatheredJob{bufferedJob: bufferedJob{row: row}, ctx: jctx, cancel: cancel})
	}
	// The first job's lease is lost while it waits: the call leaves it out.
	running.cancelRunning([]backend.LeaseRef{jobs[0].row.Lease()}, ErrLeaseLost)
	live, dropped := running.launch(jobs, call, time.Now(), 0, 10*time.Second)
	if len(live) != 1 || len(dropped) != 1 || dropped[0].row.ID != 1 {
		t.Fatalf("launch: %d live, %d dropped; want the lost job dropped", len(live), len(dropped))
	}
	if callCtx.Err() != nil {
		t.Fatal("the call's context ended with a live job left")
	}
	running.cancelRunning([]backend.LeaseRef{jobs[1].row.Lease()}, ErrLeaseLost)
	if !errors.Is(context.Cause(jobs[1].ctx), ErrLeaseLost) {
		t.Fatalf("job context cause %v", context.Cause(jobs[1].ctx))
	}
	if !errors.Is(context.Cause(callCtx), ErrLeaseLost) {
		t.Fatalf("the call's context after its last job's loss: cause %v, want ErrLeaseLost", context.Cause(callCtx))
	}
	// A second cancellation counts nothing twice.
	running.stopAll(ErrClientStopping)
	if call.live != 0 {
		t.Fatalf("call.live %d after every job ended", call.live)
	}
}

// A panic in a call is every job's result, with the stack; so is a list
// of results of the wrong length.
func TestSafeRunMany(t *testing.T) {
	rows := []*backend.JobRow{{ID: 1}, {ID: 2}, {ID: 3}}
	errs := safeRunMany(context.Background(), func(context.Context, []*backend.JobRow) []error { panic("boom") }, rows)
	var pe *panicError
	for i, err := range errs {
		if !errors.As(err, &pe) || !strings.Contains(pe.stack, "goroutine") {
			t.Fatalf("result %d after a panic: %v", i, err)
		}
	}
	errs = safeRunMany(context.Background(), func(context.Context, []*backend.JobRow) []error { return nil }, rows)
	if len(errs) != 3 || errs[2] == nil || !strings.Contains(errs[2].Error(), "0 results for a call of 3") {
		t.Fatalf("results of a short list: %v", errs)
	}
}
