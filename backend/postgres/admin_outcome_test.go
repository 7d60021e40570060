package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool"
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
	return backendThrough(t, be, proxy, opts, 4, func(c *pgx.ConnConfig) {
		c.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	})
}

// faultsThrough is the outcome-fault harness of be: client writes through
// proxy, inserts and reads go straight to be.
func faultsThrough(t *testing.T, be *postgres.Backend, client *spool.Client, proxy *testdb.Proxy) conformance.Faults {
	t.Helper()
	return conformance.Faults{
		Client:   client,
		Inserter: insertClient(t, be),
		Direct:   be,
		Proxy:    proxy,
	}
}

// TestAdminWritesWithoutServerAreNotWritten: with the server unreachable,
// cancel, retry and bulk actions fail with ErrNotWritten and change nothing.
func TestAdminWritesWithoutServerAreNotWritten(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	c, proxy := simpleProxied(t, be) // not yet connected: Cut comes before the pool's first connection
	conformance.AdminWritesWithoutServer(t, faultsThrough(t, be, c, proxy))
}

// TestAdminWriteReplyLostIsOutcomeUnknown: a cancel, retry or bulk cancel
// whose commit's reply is lost fails with ErrOutcomeUnknown, and it did
// commit: the case the error exists to warn of.
func TestAdminWriteReplyLostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	c, proxy := simpleProxied(t, be)
	conformance.AdminWriteReplyLost(t, faultsThrough(t, be, c, proxy), conformance.AdminCommits{
		Cancel:     "SET state = 'cancelled'",
		Retry:      "SET state = 'available'",
		BulkCancel: "commit\x00", // the bulk's transaction's COMMIT
	})
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
	if got := conformance.CountJobs(t, be); got != 1 {
		t.Fatalf("jobs stored: %d, want 1 (the insert whose reply was lost committed)", got)
	}
}
