package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// PoolWaitCancelled checks that a write whose context ends while it waits
// for a connection of the pool sent nothing: an insert, a debounced insert
// and a cancel, each cut off after 100 ms while hold keeps the pool's one
// connection, fail with ErrNotWritten, not ErrOutcomeUnknown, and store
// nothing. c is a client of a backend whose pool holds one connection;
// hold takes it and returns the function that gives it back.
func PoolWaitCancelled(t *testing.T, c *spool.Client, hold func(context.Context) (release func(), err error)) {
	t.Helper()
	ctx := context.Background()
	first, err := c.Insert(ctx, NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := hold(ctx)
	if err != nil {
		t.Fatalf("hold the pool's connection: %v", err)
	}
	for name, write := range map[string]func(context.Context) error{
		"Insert": func(ctx context.Context) error {
			_, err := c.Insert(ctx, NoteArgs{N: 2}, nil)
			return err
		},
		"Insert debounced": func(ctx context.Context) error {
			_, err := c.Insert(ctx, NoteArgs{N: 3}, &spool.InsertOpts{Unique: &spool.UniqueOpts{
				Key: "pool-wait", Debounce: &spool.DebounceOpts{Window: time.Minute}}})
			return err
		},
		"JobCancel": func(ctx context.Context) error { _, err := c.JobCancel(ctx, first.ID); return err },
	} {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := write(wctx)
		cancel()
		if err == nil {
			t.Fatalf("%s succeeded with the pool's one connection held", name)
		}
		if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
			t.Errorf("%s cut off waiting for a connection: %v; want ErrNotWritten, not ErrOutcomeUnknown", name, err)
		}
	}
	release()

	stats, err := c.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var jobs int64
	for _, st := range stats {
		for state, n := range st.Counts {
			jobs += n
			if state != backend.StateAvailable && n > 0 {
				t.Errorf("%d jobs %s in queue %s, want only the one inserted before, available", n, state, st.Queue)
			}
		}
	}
	if jobs != 1 {
		t.Errorf("%d jobs stored, want the one inserted before", jobs)
	}
}
