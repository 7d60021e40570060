package spool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

type pruneArgs struct{}

func (pruneArgs) Kind() string { return "prune" }

// TestJobsPrune: only finished jobs of the chosen states, older than the
// age, are deleted, in batches; bad parameters delete nothing.
func TestJobsPrune(t *testing.T) {
	ctx := context.Background()
	c, err := spool.NewClient(memory.New(), &spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for range 5 {
		res, err := c.Insert(ctx, pruneArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids[:3] {
		if _, err := c.JobCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []spool.PruneParams{
		{States: []spool.JobState{spool.JobStateCancelled}},
		{States: []spool.JobState{spool.JobStateAvailable}, OlderThan: time.Nanosecond},
		{OlderThan: time.Nanosecond},
		{States: []spool.JobState{spool.JobStateCancelled}, OlderThan: time.Nanosecond, BatchSize: -1},
		{States: []spool.JobState{spool.JobStateCancelled}, OlderThan: time.Nanosecond, Pause: -time.Second},
	} {
		if n, err := c.JobsPrune(ctx, p); !errors.Is(err, spool.ErrInvalidConfig) || n != 0 {
			t.Errorf("prune %+v: %d, %v; want 0 and ErrInvalidConfig", p, n, err)
		}
	}
	if n, err := c.JobsPrune(ctx, spool.PruneParams{States: []spool.JobState{spool.JobStateCancelled}, OlderThan: time.Hour}); err != nil || n != 0 {
		t.Fatalf("prune of jobs cancelled under an hour ago: %d, %v; want 0", n, err)
	}
	time.Sleep(2 * time.Millisecond) // the cancellations are now over a millisecond old
	n, err := c.JobsPrune(ctx, spool.PruneParams{States: []spool.JobState{spool.JobStateCancelled, spool.JobStateCompleted}, OlderThan: time.Millisecond, BatchSize: 2, Pause: time.Millisecond})
	if err != nil || n != 3 {
		t.Fatalf("prune: %d, %v; want the 3 cancelled jobs, in two batches", n, err)
	}
	for i, id := range ids {
		_, err := c.JobGet(ctx, id)
		if gone := errors.Is(err, spool.ErrNotFound); gone != (i < 3) {
			t.Errorf("job %d: gone %v, want %v (%v)", id, gone, i < 3, err)
		}
	}
}
