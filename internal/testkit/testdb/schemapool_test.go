package testdb

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	DropKeptSchemas()
	os.Exit(code)
}

func TestMigratedSchemaKeptEmptied(t *testing.T) {
	pool := PostgresPool(t)
	ctx := context.Background()
	migrations := 0
	migrate := func(ctx context.Context, schema string) error {
		migrations++
		_, err := pool.Exec(ctx, `CREATE SCHEMA `+schema+`;
CREATE TABLE `+schema+`.parent (id bigserial PRIMARY KEY, name text NOT NULL, twice bigint GENERATED ALWAYS AS (id * 2) STORED);
CREATE TABLE `+schema+`.child (id bigserial PRIMARY KEY, parent bigint NOT NULL REFERENCES `+schema+`.parent (id));
CREATE FUNCTION `+schema+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no deletes'; END $$;
CREATE TRIGGER refuse BEFORE DELETE ON `+schema+`.child FOR EACH ROW EXECUTE FUNCTION `+schema+`.refuse();
INSERT INTO `+schema+`.parent (name) VALUES ('seed');`)
		return err
	}
	kind := "sample " + NewSchemaName() // this test's own kind: no other test shares its schemas
	var first string
	t.Run("write", func(t *testing.T) {
		first = MigratedSchema(t, pool, kind, migrate)
		if _, err := pool.Exec(ctx, `INSERT INTO `+first+`.parent (name) SELECT 'row' FROM generate_series(1, 1500);
INSERT INTO `+first+`.child (parent) VALUES (2), (3);
UPDATE `+first+`.parent SET name = 'changed' WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reuse", func(t *testing.T) {
		schema := MigratedSchema(t, pool, kind, migrate)
		if schema != first {
			t.Fatalf("got schema %s, want the kept %s", schema, first)
		}
		var parents, children int
		var name string
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.parent), (SELECT count(*) FROM `+schema+`.child),
  (SELECT name FROM `+schema+`.parent WHERE id = 1)`).Scan(&parents, &children, &name); err != nil {
			t.Fatal(err)
		}
		if parents != 1 || children != 0 || name != "seed" {
			t.Fatalf("kept schema holds %d parents, %d children, seed named %q; want the migration's 1, 0, \"seed\"", parents, children, name)
		}
		var id, twice int64
		if err := pool.QueryRow(ctx, `INSERT INTO `+schema+`.parent (name) VALUES ('next') RETURNING id, twice`).Scan(&id, &twice); err != nil {
			t.Fatal(err)
		}
		if id != 2 || twice != 4 {
			t.Fatalf("next id %d (twice %d), want 2 (4) as after a fresh migration", id, twice)
		}
		// A test that changes the definition: its schema is not kept.
		if _, err := pool.Exec(ctx, `ALTER TABLE `+schema+`.parent ADD COLUMN extra int`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("changed not kept", func(t *testing.T) {
		schema := MigratedSchema(t, pool, kind, migrate)
		if schema == first {
			t.Fatalf("got schema %s again after its test changed it", schema)
		}
		var gone bool
		if err := pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, first).Scan(&gone); err != nil {
			t.Fatal(err)
		}
		if !gone {
			t.Fatalf("changed schema %s was not dropped", first)
		}
	})
	if migrations != 2 {
		t.Fatalf("%d migrations, want 2 (the first schema, and one after it was changed)", migrations)
	}
}

// TestLockHoldersNamed: the error of a wait for a schema's tables names
// the session that holds one, with its lock and its statement.
func TestLockHoldersNamed(t *testing.T) {
	pool := PostgresPool(t)
	ctx := context.Background()
	schema := NewSchemaName()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema+`; CREATE TABLE `+schema+`.t (id int)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM `+schema+`.t UNION ALL SELECT pg_backend_pid() LIMIT 1`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = awaitUnlocked(wctx, pool, schema)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (client backend", pid)) || !strings.Contains(err.Error(), "t AccessShareLock") {
		t.Fatalf("awaitUnlocked with table t locked by pid %d: %v", pid, err)
	}
}

// TestAwaitUnlockedNotHeldByLongerName: a statement running on another
// schema whose name starts with this one's (the process's kept schemas
// spool_kept_<pid>_1 and spool_kept_<pid>_10) does not hold up the wait
// for this one's tables.
func TestAwaitUnlockedNotHeldByLongerName(t *testing.T) {
	pool := PostgresPool(t)
	ctx := context.Background()
	schema := NewSchemaName()
	longer := schema + "0"
	for _, s := range []string{schema, longer} {
		if _, err := pool.Exec(ctx, `CREATE SCHEMA `+s+`; CREATE TABLE `+s+`.t (id int)`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP SCHEMA `+s+` CASCADE`) })
	}
	// A statement on the longer name that stays running: a read of its
	// table waiting behind another session's lock.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `LOCK TABLE `+longer+`.t IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	rctx, stopRead := context.WithCancel(ctx)
	defer stopRead()
	read := make(chan error, 1)
	go func() {
		_, err := pool.Exec(rctx, `SELECT * FROM `+longer+`.t`)
		read <- err
	}()
	for waiting := false; !waiting; {
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE state = 'active'
  AND wait_event_type = 'Lock' AND query = $1)`, `SELECT * FROM `+longer+`.t`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	// Bounded only so that a failure ends: a wait held up by the other
	// schema's statement runs to this deadline.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := awaitUnlocked(wctx, pool, schema); err != nil {
		t.Fatalf("wait for %s while a statement on %s runs: %v", schema, longer, err)
	}
	_ = holder.Rollback(ctx)
	if err := <-read; err != nil {
		t.Fatalf("read of %s.t: %v", longer, err)
	}
}
