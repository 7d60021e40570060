package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// TestRunAllocations: running a job whose handler succeeds allocates its
// context (with its entry in the running set) and what the handler and
// the running set take, not the outcome or the run's description it hands
// to the outcome writer (values kept on the job goroutine's stack).
func TestRunAllocations(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := &Config{CompletionBatchMax: 10, LeaseDuration: time.Minute,
		Handler: func(string) (Handler, bool) {
			return Handler{Run: func(context.Context, *backend.JobRow) error { return nil },
				Timeout: func(*backend.JobRow) time.Duration { return 0 }}, true
		}}
	running := newRunningJobs()
	out := newOutcomeWriter(memory.New(), cfg, logger, running, func(string, time.Time) {}, func(string) {})
	x := &executor{cfg: cfg, logger: logger, failures: &failureLog{logger: logger}, running: running, out: out, jobsBase: context.Background()}
	row := &backend.JobRow{ID: 1, Queue: "q", Kind: "k", Fence: 1, Attempt: 1, MaxAttempts: 5}
	one := func() {
		x.run(bufferedJob{row: row, claimedAt: time.Now()}, time.Now())
		p := <-out.in
		if p.finish.Outcome != backend.OutcomeComplete || !p.ran || p.run.kind != "k" {
			t.Fatalf("outcome %+v", p)
		}
		running.remove([]backend.LeaseRef{p.finish.Lease})
	}
	one() // the running set's first entry allocates its map
	allocs := testing.AllocsPerRun(200, one)
	// 3: the job's context (context.WithCancelCause), the jobContext with
	// its running-set entry, and one more of the context's; with the
	// outcome and the runInfo on the heap it was 5.
	if allocs > 3 {
		t.Fatalf("a job's run allocates %.1f times, want at most 3", allocs)
	}
}
