package mysql_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestPoolWaitCancelledIsNotWritten: a write cut off while it waits for a
// pool connection is not written (conformance.PoolWaitCancelled).
func TestPoolWaitCancelledIsNotWritten(t *testing.T) {
	t.Parallel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), url.Values{"spool_max_conns": {"1"}})
	if err := be.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	conformance.PoolWaitCancelled(t, c, func(ctx context.Context) (func(), error) {
		held, err := be.DB().Conn(ctx)
		if err != nil {
			return nil, err
		}
		return func() { _ = held.Close() }, nil
	})
}
