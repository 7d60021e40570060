// Package testdb gives each test its own freshly migrated schema on the real
// database servers. A missing server fails the test; it is never skipped.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolMaxConns caps each pool a test opens on the shared servers (a
// PostgreSQL pool here, a MySQL backend's through spool_max_conns). The
// servers are shared with other processes (PostgreSQL's max_connections is
// 100 on CI); a test's handles each use at most this many, and a conformance
// test uses at most three handles at once. docs/testing.md gives the budget
// this makes, measured.
const PoolMaxConns = 6

// PostgresURL is the server tests use: $SPOOL_TEST_POSTGRES_URL, or the local
// server on 127.0.0.1:5432.
func PostgresURL() string {
	if u := os.Getenv("SPOOL_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// NewSchemaName returns a unique schema name for a test.
func NewSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "spool_test_" + hex.EncodeToString(b[:])
}

// PostgresPool returns a pool to the test server, closed when the test ends.
func PostgresPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return postgresPool(t, pgx.QueryExecModeCacheStatement)
}

func postgresPool(t testing.TB, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	return PostgresPoolAt(t, PostgresURL(), mode)
}

// PostgresPoolWithMode is PostgresPool using the given query execution
// mode (QueryExecModeSimpleProtocol is what PgBouncer before 1.21 needs).
func PostgresPoolWithMode(t testing.TB, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	return postgresPool(t, mode)
}

// PostgresPoolAt returns a pool to the server at url, using the given query
// execution mode, closed when the test ends.
func PostgresPoolAt(t testing.TB, url string, mode pgx.QueryExecMode) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse test database URL: %v", err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	cfg.MaxConns = PoolMaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to PostgreSQL at %s: %v", url, err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL at %s does not answer (start it as the README says): %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// DropSchemaAtEnd drops schema, a test's own (NewSchemaName), through pool
// when the test ends, once no other session holds a lock on its tables. The
// backend's tests make the backend on it: this module imports no backend, so
// that the backends' modules can require it for their tests without a cycle.
func DropSchemaAtEnd(t testing.TB, pool *pgxpool.Pool, schema string) {
	t.Helper()
	DropSchemasAtEnd(t, []*pgxpool.Pool{pool}, []string{schema})
}

// DropSchemasAtEnd is DropSchemaAtEnd for schemas[i] through pools[i], one
// on each of several servers (a sharded store's): they drop them at once.
func DropSchemasAtEnd(t testing.TB, pools []*pgxpool.Pool, schemas []string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A statement the stopped client sent just before its connection
		// closed can still be unread in the server's socket when
		// awaitUnlocked looks, then lock the schema's tables in another
		// order than the drop: the server ends one of the two as a
		// deadlock's victim (a CI run saw the drop chosen, beside a rescue
		// cut off by the stop). The other runs to its end, so the drop,
		// tried again once the tables are free, goes through; each try
		// ends a deadlock, which bounds the tries.
		errs := make([]error, len(pools))
		var wg sync.WaitGroup
		for i := range pools {
			wg.Go(func() { errs[i] = dropSchema(ctx, pools[i], schemas[i]) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// isDeadlock reports whether err is the server's deadlock error (40P01).
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// awaitUnlocked waits until no other session holds a lock on a table of
// schema. A client the test stopped can leave a statement running on the
// server: pgx ends a query whose context is cancelled by closing its
// connection, and the server runs the statement to its end (the
// maintenance's rescue of expired lease rows, cut off by the stop, was
// seen there). DROP SCHEMA beside it deadlocked: the drop had locked
// spool_jobs and waited for spool_leases, which the rescue held while its
// spool_unlease waited for spool_jobs.
func awaitUnlocked(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	for {
		var held bool
		// A lock on one of its tables, or a statement naming the schema
		// that is running but has not reached its first lock yet.
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity a WHERE `+holdsSchema+`)`,
			schema, namePattern(schema)).Scan(&held)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("wait for the schema's tables to be unlocked: %w; held by: %s", err, lockHolders(pool, schema))
			}
			return fmt.Errorf("wait for the schema's tables to be unlocked: %w", err)
		}
		if !held {
			return nil
		}
		// The statement left running ends on its own; look again shortly
		// rather than keep the server busy asking.
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the schema's tables to be unlocked: %w; held by: %s", ctx.Err(), lockHolders(pool, schema))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// holdsSchema is the condition on a session a of pg_stat_activity that
// holds up the wait for schema $1 ($2 its namePattern): another session
// that holds or waits for a lock on one of its tables, or runs a statement
// naming it (one that has not reached its first lock yet).
//
// The name must stand as a word in the statement: the process's kept
// schemas spool_kept_<pid>_1 and spool_kept_<pid>_10 share a prefix, and a
// substring match made the give-back of the first wait for every statement
// on the second, where a busy test (NoJobRunsTwice, four clients) has one
// running at about half of the wait's looks on a lightly loaded machine,
// and more the busier the server.
//
// An autovacuum worker does not hold it up: it takes no lock that the
// reset's DELETEs wait for, and the server cancels it for a VACUUM or a
// DROP that waits for its lock (not being an anti-wraparound run on a
// test's young tables).
const holdsSchema = `a.pid <> pg_backend_pid() AND a.backend_type <> 'autovacuum worker' AND (
  a.pid IN (SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)
  OR (a.state = 'active' AND a.query ~ $2))`

// namePattern is a regular expression (PostgreSQL's) that matches a
// statement's text naming schema: the name not within a longer
// identifier.
func namePattern(schema string) string {
	return `(^|[^[:alnum:]_$])` + regexp.QuoteMeta(schema) + `($|[^[:alnum:]_$])`
}

// lockHolders describes the sessions that hold a lock on a table of
// schema or run a statement naming it, for an error that says who kept a
// test waiting: each session's kind, state, locks, transaction age and
// statement.
func lockHolders(pool *pgxpool.Pool, schema string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT a.pid, a.backend_type, coalesce(a.application_name, ''), coalesce(a.state, ''),
  coalesce(now() - a.xact_start, '0'::interval)::text,
  coalesce((SELECT string_agg(DISTINCT c.relname || ' ' || l.mode || CASE WHEN l.granted THEN '' ELSE ' (waiting)' END, ', ')
    FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE l.pid = a.pid AND n.nspname = $1), ''),
  left(coalesce(a.query, ''), 200)
FROM pg_stat_activity a
WHERE `+holdsSchema, schema, namePattern(schema))
	if err != nil {
		return fmt.Sprintf("(could not read them: %v)", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			pid                               int
			kind, app, state, age, locks, sql string
		)
		if err := rows.Scan(&pid, &kind, &app, &state, &age, &locks, &sql); err != nil {
			return fmt.Sprintf("(could not read them: %v)", err)
		}
		out = append(out, fmt.Sprintf("pid %d (%s, %q, %s, in a transaction for %s; locks: %s): %s", pid, kind, app, state, age, locks, sql))
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("(could not read them: %v)", err)
	}
	if len(out) == 0 {
		return "nobody any more"
	}
	return strings.Join(out, "; ")
}
