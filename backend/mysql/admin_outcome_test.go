package mysql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
)

// jobStates returns the jobs' states by id, read directly.
func jobStates(t *testing.T, be *mysql.Backend, ids ...int64) []backend.State {
	t.Helper()
	out := make([]backend.State, len(ids))
	for i, id := range ids {
		j, err := be.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = j.State
	}
	return out
}

func insertNote(t *testing.T, c *spool.Client, n int) int64 {
	t.Helper()
	res, err := c.Insert(context.Background(), conformance.NoteArgs{N: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// TestAdminWritesWithoutServerAreNotWritten: with the server unreachable,
// cancel, retry, delete, bulk actions and pauses fail with ErrNotWritten
// and change nothing.
func TestAdminWritesWithoutServerAreNotWritten(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	id := insertNote(t, insertOnlyClient(t, direct), 1)
	c := insertOnlyClient(t, proxied)
	proxy.Cut()
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
			t.Fatalf("%s with the server unreachable: got %v, want ErrNotWritten", op, err)
		}
	}
	_, err := c.JobCancel(ctx, id)
	check("cancel", err)
	_, err = c.JobRetry(ctx, id)
	check("retry", err)
	_, err = c.JobDelete(ctx, id)
	check("delete", err)
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "default"})
	check("bulk cancel", err)
	if res.Changed != 0 {
		t.Fatalf("bulk cancel changed %d", res.Changed)
	}
	check("pause", c.QueuePause(ctx, "default"))
	if got := jobStates(t, direct, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the failed writes: %s, want available", got[0])
	}
}

// TestAdminWriteReplyLostIsOutcomeUnknown: a cancel, retry or bulk cancel
// whose COMMIT's reply is lost fails with ErrOutcomeUnknown, and it did
// commit: the case the error exists to warn of.
func TestAdminWriteReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	inserter := insertOnlyClient(t, direct)
	id := insertNote(t, inserter, 1)
	c := insertOnlyClient(t, proxied)
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
			t.Fatalf("%s whose reply was lost: got %v, want ErrOutcomeUnknown", op, err)
		}
	}

	proxy.DropReplyTo("\x03COMMIT") // COM_QUERY COMMIT, not READ-COMMITTED
	_, err := c.JobCancel(ctx, id)
	check("cancel", err)
	if got := jobStates(t, direct, id); got[0] != backend.StateCancelled {
		t.Fatalf("job after the cancel whose reply was lost: %s, want cancelled (it committed)", got[0])
	}

	proxy.DropReplyTo("\x03COMMIT") // COM_QUERY COMMIT, not READ-COMMITTED
	_, err = c.JobRetry(ctx, id)
	check("retry", err)
	if got := jobStates(t, direct, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the retry whose reply was lost: %s, want available (it committed)", got[0])
	}

	more := []int64{insertNote(t, inserter, 2), insertNote(t, inserter, 3)}
	proxy.DropReplyTo("\x03COMMIT") // COM_QUERY COMMIT, not READ-COMMITTED
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "default"})
	check("bulk cancel", err)
	if res.Changed != 0 {
		t.Fatalf("bulk cancel reported %d changed", res.Changed)
	}
	for i, s := range jobStates(t, direct, append(more, id)...) {
		if s != backend.StateCancelled {
			t.Fatalf("job %d after the bulk cancel whose reply was lost: %s, want cancelled (it committed)", i, s)
		}
	}
}
