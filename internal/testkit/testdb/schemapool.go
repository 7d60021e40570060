package testdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrating a fresh schema for every test was most of what a conformance
// test cost the server: the migrations' DDL and the drop of some forty
// relations at the end, against a few DELETEs of a few rows to empty a
// schema that stays (BENCHMARKS.md, "CI's time: schemas kept between
// tests"). MigratedSchema keeps the schemas of one process's tests and
// hands each back emptied to its state just after migration.
//
// A schema goes back only when its definition is the one it had just after
// migration (a test may alter it, to make writes fail); any other is
// dropped. Its rows are deleted with foreign keys and triggers off, the
// rows the migrations wrote (the epoch row, the migrations' records) put
// back and its sequences reset: the next test sees what a fresh migration
// gives, with ids starting at 1. The server's statistics of its tables
// and their change counts are not reset: autovacuum may analyze a kept
// table within a short test, and later plans follow (docs/testing.md).

// pooledSchemaPrefix starts the names of kept schemas, followed by the
// process id: DropKeptSchemas and the sweep of schemas left by a process
// that ended without it both go by it.
const pooledSchemaPrefix = "spool_kept_"

// keptSchema is a schema kept between tests, with what a reset needs.
type keptSchema struct {
	name   string
	tables []string // qualified
	// reset is one statement that fails, with changedMarker, when the
	// schema's definition is not the one it had just after migration, and
	// otherwise empties it to its state then.
	reset string
}

// changedMarker is the message of reset's failure on a changed schema.
const changedMarker = "spool test schema changed by its test"

// schemaPool holds the free schemas of one server and kind.
type schemaPool struct {
	mu   sync.Mutex
	url  string
	free []*keptSchema
}

var (
	poolsMu    sync.Mutex
	pools      = map[string]*schemaPool{}
	keptSerial atomic.Int64
	sweepOnce  sync.Map // server -> *sync.Once
)

// MigratedSchema returns a schema of pool's server for the test's own use,
// migrated by migrate (called with a new schema's name when no kept one is
// free) and given back, emptied, when the test ends. kind names what
// migrate makes: schemas of one kind are interchangeable. The caller
// migrates with the backend's default options; a test that needs other
// schema options (a channel of its own) migrates a schema of its own.
func MigratedSchema(t testing.TB, pool *pgxpool.Pool, kind string, migrate func(ctx context.Context, schema string) error) string {
	t.Helper()
	cfg := pool.Config().ConnConfig
	server := fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	sp := poolFor(server+" "+kind, pool.Config().ConnString())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sweep(ctx, t, server, pool)

	s := sp.take(ctx, pool)
	if s == nil {
		name := fmt.Sprintf("%s%d_%d", pooledSchemaPrefix, os.Getpid(), keptSerial.Add(1))
		if err := migrate(ctx, name); err != nil {
			_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
			t.Fatalf("migrate: %v", err)
		}
		var err error
		if s, err = capture(ctx, pool, name); err != nil {
			_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
			t.Fatalf("keep test schema %s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := awaitUnlocked(ctx, pool, s.name); err != nil {
			t.Errorf("give back test schema %s: %v", s.name, err)
			return
		}
		if err := sp.giveBack(ctx, pool, s); err != nil {
			t.Errorf("give back test schema %s: %v", s.name, err)
		}
	})
	return s.name
}

func poolFor(key, url string) *schemaPool {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	sp := pools[key]
	if sp == nil {
		sp = &schemaPool{url: url}
		pools[key] = sp
	}
	return sp
}

// take returns a free schema that still exists on the server, or nil. (A
// server of a test's own can be gone, and another started on its port.)
func (sp *schemaPool) take(ctx context.Context, pool *pgxpool.Pool) *keptSchema {
	for {
		sp.mu.Lock()
		if len(sp.free) == 0 {
			sp.mu.Unlock()
			return nil
		}
		s := sp.free[len(sp.free)-1]
		sp.free = sp.free[:len(sp.free)-1]
		sp.mu.Unlock()
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, s.name).Scan(&ok); err == nil && ok {
			return s
		}
	}
}

// giveBack empties s to its state after migration and frees it, or drops
// it if its definition changed or it cannot be emptied.
func (sp *schemaPool) giveBack(ctx context.Context, pool *pgxpool.Pool, s *keptSchema) error {
	// A test that wrote many rows leaves them dead: vacuumed after the
	// reset, the next test's claims do not step over them.
	var written int64
	err := pool.QueryRow(ctx, `SELECT coalesce(max(last_value), 0) FROM pg_sequences WHERE schemaname = $1`, s.name).Scan(&written)
	if err == nil {
		_, err = pool.Exec(ctx, s.reset)
	}
	if err == nil && written > 1000 {
		_, err = pool.Exec(ctx, "VACUUM "+strings.Join(s.tables, ", "))
	}
	if err == nil {
		sp.mu.Lock()
		sp.free = append(sp.free, s)
		sp.mu.Unlock()
		return nil
	}
	// Changed by the test, or not emptied: not kept.
	return dropSchema(ctx, pool, s.name)
}

// dropSchema drops a test's schema once its tables are free; a drop that a
// statement left running deadlocks with is tried again (see
// DropSchemaAtEnd).
func dropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = awaitUnlocked(ctx, pool, schema); err != nil {
			break
		}
		if _, err = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); !isDeadlock(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("drop test schema %s: %w", schema, err)
	}
	return nil
}

// capture builds the reset of the freshly migrated schema: a DO block
// that checks the definition, deletes every row, puts back the rows the
// migrations wrote (the epoch row, the migrations' records) and sets the
// sequences where the migrations left them. Foreign keys and triggers are
// off for it (session_replication_role, a superuser's setting, as the
// tests' server gives): every row goes, so no key is left dangling, and no
// trigger is to notify anyone of it.
func capture(ctx context.Context, pool *pgxpool.Pool, schema string) (*keptSchema, error) {
	var ns uint32
	if err := pool.QueryRow(ctx, `SELECT oid FROM pg_namespace WHERE nspname = $1`, schema).Scan(&ns); err != nil {
		return nil, fmt.Errorf("read schema %s: %w", schema, err)
	}
	fpQuery := strings.ReplaceAll(fingerprintQuery, "$1::oid", strconv.FormatUint(uint64(ns), 10)+"::oid")
	var fp string
	if err := pool.QueryRow(ctx, fpQuery).Scan(&fp); err != nil {
		return nil, fmt.Errorf("read the definition of %s: %w", schema, err)
	}
	var b strings.Builder
	b.WriteString("DO $spool_reset$ BEGIN\n")
	fmt.Fprintf(&b, "IF (%s) IS DISTINCT FROM '%s' THEN RAISE EXCEPTION '%s'; END IF;\n", fpQuery, fp, changedMarker)
	b.WriteString("PERFORM set_config('session_replication_role', 'replica', true);\n")
	tables, err := relations(ctx, pool, schema, "r")
	if err != nil {
		return nil, err
	}
	s := &keptSchema{name: schema}
	for _, tbl := range tables {
		q := qualified(schema, tbl)
		s.tables = append(s.tables, q)
		fmt.Fprintf(&b, "DELETE FROM %s;\n", q)
		var rows string
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(json_agg(t), '[]')::text, count(*) FROM %s t`, q)).Scan(&rows, &n); err != nil {
			return nil, fmt.Errorf("read the rows of %s: %w", tbl, err)
		}
		if n == 0 {
			continue
		}
		cols, err := insertable(ctx, pool, schema, tbl)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "INSERT INTO %[1]s (%[2]s) SELECT %[2]s FROM json_populate_recordset(NULL::%[1]s, %[3]s::json);\n",
			q, cols, "$spool_rows$"+rows+"$spool_rows$")
	}
	seqs, err := relations(ctx, pool, schema, "S")
	if err != nil {
		return nil, err
	}
	for _, seq := range seqs {
		var last int64
		var called bool
		q := qualified(schema, seq)
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT last_value, is_called FROM %s`, q)).Scan(&last, &called); err != nil {
			return nil, fmt.Errorf("read sequence %s: %w", seq, err)
		}
		fmt.Fprintf(&b, "PERFORM setval(%s, %d, %t);\n", quoteLiteral(q), last, called)
	}
	b.WriteString("END $spool_reset$")
	s.reset = b.String()
	return s, nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// insertable lists tbl's columns a row may be written with (not
// generated), quoted.
func insertable(ctx context.Context, pool *pgxpool.Pool, schema, tbl string) (string, error) {
	rows, err := pool.Query(ctx, `SELECT quote_ident(a.attname) FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
  ORDER BY a.attnum`, schema, tbl)
	if err != nil {
		return "", fmt.Errorf("read the columns of %s: %w", tbl, err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("read the columns of %s: %w", tbl, err)
	}
	return strings.Join(cols, ", "), nil
}

// relations lists the schema's relations of one kind ("r" tables, "S"
// sequences).
func relations(ctx context.Context, pool *pgxpool.Pool, schema, kind string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = $1 AND c.relkind = $2 ORDER BY c.relname`, schema, kind)
	if err != nil {
		return nil, fmt.Errorf("list the relations of %s: %w", schema, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the relations of %s: %w", schema, err)
	}
	return names, nil
}

func qualified(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// fingerprintQuery sums up the definition of the schema whose oid is $1:
// its relations and their options and grants, columns, indexes,
// constraints, functions, triggers, views and types. (The oid is written
// in, not looked up by name in the query: the planner then reads each
// catalog through its index.)
const fingerprintQuery = `SELECT coalesce(md5(string_agg(d, E'\n' ORDER BY d)), '') FROM (
  SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.reloptions::text, '') || ' ' || coalesce(c.relacl::text, '')
    FROM pg_class c WHERE c.relnamespace = $1::oid
  UNION ALL
  SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
      || ' ' || a.attgenerated::text || ' ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE c.relnamespace = $1::oid AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'idx ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    WHERE c.relnamespace = $1::oid
  UNION ALL
  SELECT 'con ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = $1::oid
  UNION ALL
  SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) || ' ' || coalesce(p.proconfig::text, '') || ' ' || coalesce(p.proacl::text, '')
    FROM pg_proc p WHERE p.pronamespace = $1::oid
  UNION ALL
  SELECT 'trg ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = $1::oid AND NOT t.tgisinternal
  UNION ALL
  SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid) FROM pg_class c
    WHERE c.relnamespace = $1::oid AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT 'type ' || t.typname || ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '')
    FROM pg_type t WHERE t.typnamespace = $1::oid
) s(d)`

// sweep drops, once per process and server, the kept schemas of processes
// on this host that are gone (a test binary ended by its timeout does not
// drop its own).
func sweep(ctx context.Context, t testing.TB, server string, pool *pgxpool.Pool) {
	o, _ := sweepOnce.LoadOrStore(server, new(sync.Once))
	o.(*sync.Once).Do(func() {
		rows, err := pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, pooledSchemaPrefix)
		if err != nil {
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return
		}
		for _, name := range names {
			pid, gone := keptByGoneProcess(name)
			if !gone {
				continue
			}
			if err := dropSchema(ctx, pool, name); err != nil {
				t.Logf("drop a test schema left by process %d: %v", pid, err)
			}
		}
	})
}

// keptByGoneProcess reads the process id from the name of a kept schema or
// database and reports whether that process is gone (another than this
// one, no longer running on this host).
func keptByGoneProcess(name string) (pid int, gone bool) {
	pidText, _, _ := strings.Cut(strings.TrimPrefix(name, pooledSchemaPrefix), "_")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid == os.Getpid() || processAlive(pid) {
		return pid, false
	}
	return pid, true
}

// processAlive reports whether a process with id pid runs on this host.
// (A server shared by several hosts would see another host's live process
// as gone: the tests' servers are each machine's own.)
func processAlive(pid int) bool {
	if _, err := os.Stat("/proc/self"); err != nil {
		return true // no /proc to tell: kept
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// DropKeptSchemas drops the schemas MigratedSchema kept, on every server
// still answering, and the databases MigratedMySQLDatabase kept; a
// package's TestMain calls it after its tests.
func DropKeptSchemas() {
	dropKeptMySQL()
	poolsMu.Lock()
	defer poolsMu.Unlock()
	for _, sp := range pools {
		sp.mu.Lock()
		free := sp.free
		sp.free = nil
		sp.mu.Unlock()
		if len(free) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := pgx.Connect(ctx, sp.url)
		if err == nil {
			for _, s := range free {
				_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+s.name+" CASCADE")
			}
			_ = conn.Close(ctx)
		}
		cancel()
	}
}
