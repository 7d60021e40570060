package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// simpleProxied is a client over be's schema through a proxy, sending each
// statement as text (the simple protocol, as through a transaction
// pooler), so that the proxy can lose the reply to one statement by its
// text (Proxy.DropReplyTo).
func simpleProxied(t *testing.T, be *postgres.Backend) (*spool.Client, *testdb.Proxy) {
	t.Helper()
	proxy := testdb.NewProxy(t)
	return insertClient(t, simpleProxiedBackend(t, be, proxy, postgres.Options{})), proxy
}

// simpleProxiedBackend is a backend with options on be's schema through
// proxy, sending each statement as text.
func simpleProxiedBackend(t *testing.T, be *postgres.Backend, proxy *testdb.Proxy, opts postgres.Options) *postgres.Backend {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	opts.Schema = be.Schema()
	pbe, err := postgres.New(pool, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pbe.Close() }) // before the pool closes
	return pbe
}

// states returns the jobs' states by id, read directly.
func states(t *testing.T, be *postgres.Backend, ids ...int64) []backend.State {
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

// insertNote inserts one job directly and returns its id.
func insertNote(t *testing.T, c *spool.Client, n int) int64 {
	t.Helper()
	res, err := c.Insert(context.Background(), conformance.NoteArgs{N: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// TestAdminWritesWithoutServerAreNotWritten: with the server unreachable,
// cancel, retry and bulk actions fail with ErrNotWritten and change nothing.
func TestAdminWritesWithoutServerAreNotWritten(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	direct := insertClient(t, be)
	id := insertNote(t, direct, 1)
	c, proxy := simpleProxied(t, be)
	proxy.Cut() // before the pool's first connection
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
	if got := states(t, be, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the failed writes: %s, want available", got[0])
	}
}

// TestAdminWriteReplyLostIsOutcomeUnknown: a cancel, retry or bulk cancel
// whose commit's reply is lost fails with ErrOutcomeUnknown, and it did
// commit: the case the error exists to warn of.
func TestAdminWriteReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	direct := insertClient(t, be)
	id := insertNote(t, direct, 1)
	c, proxy := simpleProxied(t, be)
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
			t.Fatalf("%s whose reply was lost: got %v, want ErrOutcomeUnknown", op, err)
		}
	}

	proxy.DropReplyTo("SET state = 'cancelled'")
	_, err := c.JobCancel(ctx, id)
	check("cancel", err)
	if got := states(t, be, id); got[0] != backend.StateCancelled {
		t.Fatalf("job after the cancel whose reply was lost: %s, want cancelled (it committed)", got[0])
	}

	proxy.DropReplyTo("SET state = 'available'")
	_, err = c.JobRetry(ctx, id)
	check("retry", err)
	if got := states(t, be, id); got[0] != backend.StateAvailable {
		t.Fatalf("job after the retry whose reply was lost: %s, want available (it committed)", got[0])
	}

	more := []int64{insertNote(t, direct, 2), insertNote(t, direct, 3)}
	proxy.DropReplyTo("commit\x00") // the bulk's transaction's COMMIT
	res, err := c.JobsCancel(ctx, spool.JobFilter{Queue: "default"})
	check("bulk cancel", err)
	if res.Changed != 0 {
		t.Fatalf("bulk cancel reported %d changed", res.Changed)
	}
	for i, s := range states(t, be, append(more, id)...) {
		if s != backend.StateCancelled {
			t.Fatalf("job %d after the bulk cancel whose reply was lost: %s, want cancelled (it committed)", i, s)
		}
	}
}

// TestInsertReplyLostSimpleProtocolIsOutcomeUnknown: through the simple
// protocol (a transaction pooler's), an insert whose reply is lost after
// it committed fails with ErrOutcomeUnknown, not ErrNotWritten, though pgx
// reports the lost reply as "conn closed", safe to retry.
func TestInsertReplyLostSimpleProtocolIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	c, proxy := simpleProxied(t, be)
	proxy.DropReplyTo("INSERT INTO")
	_, err := c.Insert(context.Background(), conformance.NoteArgs{N: 1}, nil)
	if !errors.Is(err, spool.ErrOutcomeUnknown) || errors.Is(err, spool.ErrNotWritten) {
		t.Fatalf("insert whose reply was lost: got %v, want ErrOutcomeUnknown", err)
	}
	if got := countNotes(t, be); got != 1 {
		t.Fatalf("jobs stored: %d, want 1 (the insert whose reply was lost committed)", got)
	}
}
