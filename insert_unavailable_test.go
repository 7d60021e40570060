package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// refusingBackend refuses its next `refusals` inserts with err, then
// inserts; it counts the tries.
type refusingBackend struct {
	*memory.Backend
	refusals, tries atomic.Int32
	err             error
}

func (b *refusingBackend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	b.tries.Add(1)
	if b.refusals.Add(-1) >= 0 {
		return nil, b.err
	}
	return b.Backend.JobInsertMany(ctx, p)
}

type plainArgs struct{}

func (plainArgs) Kind() string { return "plain" }

// TestInsertRetriesUnavailable: an insert the store refused unwritten for
// want of a connection is tried again, 3 times in all; one whose outcome is
// unknown is not, as it may have been written.
func TestInsertRetriesUnavailable(t *testing.T) {
	ctx := context.Background()
	noSlot := fmt.Errorf("insert jobs: %w: %w: the server has no connection free", backend.ErrNotWritten, backend.ErrUnavailable)
	unknown := fmt.Errorf("insert jobs: %w: connection reset", backend.ErrOutcomeUnknown)
	for _, c := range []struct {
		name      string
		err       error
		refusals  int32
		wantTries int32
		wantErr   error // nil: inserted
	}{
		{"refused twice", noSlot, 2, 3, nil},
		{"refused throughout", noSlot, 10, 3, spool.ErrUnavailable},
		{"outcome unknown", unknown, 1, 1, spool.ErrOutcomeUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := &refusingBackend{Backend: memory.New(), err: c.err}
			be.refusals.Store(c.refusals)
			cl, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := cl.Insert(ctx, plainArgs{}, nil)
			if got := be.tries.Load(); got != c.wantTries {
				t.Errorf("%d tries, want %d", got, c.wantTries)
			}
			jobs, lerr := be.JobList(ctx, &spool.JobListParams{Limit: 10})
			if lerr != nil {
				t.Fatal(lerr)
			}
			if c.wantErr == nil {
				if err != nil || len(jobs) != 1 || jobs[0].ID != res.ID {
					t.Fatalf("insert: %v, %d jobs stored; want the job inserted", err, len(jobs))
				}
				return
			}
			if !errors.Is(err, c.wantErr) || len(jobs) != 0 {
				t.Fatalf("insert: %v, %d jobs stored; want %v and nothing stored", err, len(jobs), c.wantErr)
			}
			if c.wantErr == spool.ErrUnavailable && !errors.Is(err, spool.ErrNotWritten) {
				t.Fatalf("insert: %v, want it to say it was not written", err)
			}
		})
	}
}
