package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/backendtest"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// startClusters starts n PostgreSQL clusters of the test's own, each under a
// temporary directory on a port of its own, stopped when the test ends, and
// returns their URLs.
func startClusters(t *testing.T, n int) []string {
	t.Helper()
	urls := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := os.MkdirTemp("", "spool-shard-")
			if err != nil {
				errs[i] = err
				return
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			srv, err := dbserver.StartPostgres(context.Background(), dir)
			if err != nil {
				errs[i] = fmt.Errorf("cluster %d: %w", i, err)
				return
			}
			t.Cleanup(func() {
				if err := srv.Stop(); err != nil {
					t.Errorf("stop cluster %d: %v", i, err)
				}
			})
			urls[i] = srv.URL()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return urls
}

// shardTx adapts a *shard.LazyTx over pgx to backendtest.Tx.
type shardTx struct{ *shard.LazyTx }

func (t shardTx) BackendTx() backend.Tx { return t.LazyTx }

func (t shardTx) Commit(ctx context.Context) error {
	if _, tx, ok := t.Bound(); ok {
		return tx.(pgx.Tx).Commit(ctx)
	}
	return nil
}

func (t shardTx) Rollback(ctx context.Context) error {
	if _, tx, ok := t.Bound(); ok {
		return tx.(pgx.Tx).Rollback(ctx)
	}
	return nil
}

// shardHarness makes, per test, a sharded backend over a fresh schema on
// each cluster.
func shardHarness(urls []string, opts *shard.Options) backendtest.Harness {
	open := func(t *testing.T, shards []backend.Backend) *shard.Backend {
		be, err := shard.New(shards, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	return backendtest.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			shards := make([]backend.Backend, len(urls))
			for i, u := range urls {
				shards[i] = testdb.PostgresOn(t, testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement))
			}
			return open(t, shards)
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			sb := be.(*shard.Backend)
			shards := make([]backend.Backend, len(urls))
			for i, u := range urls {
				other, err := postgres.New(testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement),
					&postgres.Options{Schema: sb.Shard(i).(*postgres.Backend).Schema()})
				if err != nil {
					t.Fatal(err)
				}
				shards[i] = other
			}
			return open(t, shards)
		},
		BeginTx: func(t *testing.T, be backend.Backend) backendtest.Tx {
			sb := be.(*shard.Backend)
			tx := shardTx{shard.NewLazyTx(func(ctx context.Context, s int) (backend.Tx, error) {
				return sb.Shard(s).(*postgres.Backend).Pool().Begin(ctx)
			})}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		},
	}
}

// TestShardedConformance runs the conformance suite over three PostgreSQL
// clusters, with queues placed by queue and by key.
func TestShardedConformance(t *testing.T) {
	urls := startClusters(t, 3)
	t.Run("ByQueue", func(t *testing.T) { backendtest.Run(t, shardHarness(urls, nil)) })
	t.Run("ByKey", func(t *testing.T) {
		h := shardHarness(urls, &shard.Options{Placement: shard.ByKey})
		h.Exceptions = shard.ConformanceExceptionsByKey
		backendtest.Run(t, h)
	})
}
