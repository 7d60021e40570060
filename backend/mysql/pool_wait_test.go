package mysql_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestPoolWaitCancelledIsNotWritten: a write whose context ends while it
// waits for a pool connection sent nothing, so it fails with
// ErrNotWritten, not ErrOutcomeUnknown, and writes nothing.
func TestPoolWaitCancelledIsNotWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, url.Values{"spool_max_conns": {"1"}})
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}

	held, err := be.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(context.Context) error{
		"Insert": func(ctx context.Context) error {
			_, err := c.Insert(ctx, conformance.NoteArgs{N: 2}, nil)
			return err
		},
		"Insert debounced": func(ctx context.Context) error {
			_, err := c.Insert(ctx, conformance.NoteArgs{N: 3}, &spool.InsertOpts{Unique: &spool.UniqueOpts{
				Key: "pw", Debounce: &spool.DebounceOpts{Window: time.Minute}}})
			return err
		},
		"JobCancel": func(ctx context.Context) error { _, err := c.JobCancel(ctx, first.ID); return err },
	} {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := write(wctx)
		cancel()
		if err == nil {
			t.Fatalf("%s: succeeded with the pool's one connection held", name)
		}
		if !errors.Is(err, spool.ErrNotWritten) || errors.Is(err, spool.ErrOutcomeUnknown) {
			t.Errorf("%s cut off waiting for a connection: %v; want ErrNotWritten, not ErrOutcomeUnknown", name, err)
		}
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}

	var n int
	if err := be.DB().QueryRowContext(ctx, "SELECT count(*) FROM spool_jobs WHERE state <> 'cancelled'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d jobs not cancelled, want the one inserted before", n)
	}
}
