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

// settlingStore is a store with two settle writers whose JobFinishMany
// reports each call's jobs on calls and, for a batch holding job 1, waits
// for hold to close before it returns.
type settlingStore struct {
	*memory.Backend
	calls chan []int64
	hold  chan struct{}
}

func (s *settlingStore) SettleWriters() int { return 2 }

func (s *settlingStore) JobFinishMany(_ context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	ids := make([]int64, len(p.Finishes))
	for i, f := range p.Finishes {
		ids[i] = f.Lease.ID
	}
	s.calls <- ids
	for _, id := range ids {
		if id == 1 {
			<-s.hold
		}
	}
	return &backend.JobFinishManyResult{}, nil
}

// TestSettleWritersBeside: while the outcome of a job with dependents is
// being written (a long release), the outcomes of another job with
// dependents and of a plain job are written beside it, each by a writer
// of its own; close waits for the held write.
func TestSettleWritersBeside(t *testing.T) {
	s := &settlingStore{Backend: memory.New(), calls: make(chan []int64, 8), hold: make(chan struct{})}
	cfg := &Config{CompletionBatchMax: 10}
	m := newOutcomeWriter(s, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), newRunningJobs(),
		func(string, time.Time) {}, func(string) {})
	go m.run()
	finish := func(id int64) backend.JobFinish {
		return backend.JobFinish{Lease: backend.LeaseRef{ID: id, Fence: 1}, Outcome: backend.OutcomeComplete}
	}
	m.addRunOf(&backend.JobRow{ID: 1, Queue: "q", HasDependents: true}, finish(1), nil, false)
	if got := <-s.calls; len(got) != 1 || got[0] != 1 {
		t.Fatalf("first write %v, want job 1 alone", got)
	}
	// Job 1's write is held: the next outcome of a job with dependents
	// goes to the other settle writer, a plain one to the plain writer.
	m.addRunOf(&backend.JobRow{ID: 2, Queue: "q", HasDependents: true}, finish(2), nil, false)
	m.addRunOf(&backend.JobRow{ID: 3, Queue: "q"}, finish(3), nil, false)
	seen := map[int64]bool{}
	for range 2 {
		for _, id := range <-s.calls {
			seen[id] = true
		}
	}
	if !seen[2] || !seen[3] || seen[1] {
		t.Fatalf("written beside job 1's held write: %v, want jobs 2 and 3", seen)
	}
	m.close()
	select {
	case <-m.done:
		t.Fatal("the writer finished while job 1's write was held")
	default:
	}
	close(s.hold)
	<-m.done
}
