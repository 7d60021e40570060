package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MigratedMySQLDatabase is MigratedSchema's counterpart on the MySQL/MariaDB
// test server: a database migrated by migrate (called with a new
// database's name when no kept one is free), kept between the process's
// tests and given back emptied to its state just after migration: every
// table's rows deleted (foreign key checks off), the counters of its
// AUTO_INCREMENT columns back at 1. The tables the migrations wrote rows
// into (the migrations' records) are kept as they are, and checked: a
// database whose definition or kept rows a test changed is dropped, not
// kept. kind names what migrate makes.
//
// The caller opens its backend on the database after this call, so that
// the backend is closed (its cleanup runs first) before the database goes
// back.
func MigratedMySQLDatabase(t testing.TB, kind string, migrate func(ctx context.Context, database string) error) string {
	t.Helper()
	admin := MySQLAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mysqlSweepOnce.Do(func() { sweepMySQL(ctx, t, admin) })
	mp := mysqlPoolFor(kind)
	d := mp.take()
	if d == nil {
		name := fmt.Sprintf("%s%d_%d", pooledSchemaPrefix, os.Getpid(), keptSerial.Add(1))
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
			t.Fatalf("create test database: %v", err)
		}
		if err := migrate(ctx, name); err != nil {
			_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
			t.Fatalf("migrate: %v", err)
		}
		var err error
		if d, err = captureMySQL(ctx, admin, name); err != nil {
			_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
			t.Fatalf("keep test database %s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := mp.giveBack(ctx, admin, d); err != nil {
			t.Errorf("give back test database %s: %v", d.name, err)
		}
	})
	return d.name
}

// keptDatabase is a MySQL database kept between tests.
type keptDatabase struct {
	name        string
	fingerprint string
	emptied     []string // tables the reset empties
	counted     []string // of them, those with an AUTO_INCREMENT column
	seeded      []string // tables whose rows the migrations wrote, kept
	seedSum     string   // their checksum just after migration
}

// mysqlPool holds the free databases of one kind.
type mysqlPool struct {
	mu   sync.Mutex
	free []*keptDatabase
}

var (
	mysqlPoolsMu   sync.Mutex
	mysqlPools     = map[string]*mysqlPool{}
	mysqlSweepOnce sync.Once
)

func mysqlPoolFor(kind string) *mysqlPool {
	mysqlPoolsMu.Lock()
	defer mysqlPoolsMu.Unlock()
	mp := mysqlPools[kind]
	if mp == nil {
		mp = &mysqlPool{}
		mysqlPools[kind] = mp
	}
	return mp
}

func (mp *mysqlPool) take() *keptDatabase {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if len(mp.free) == 0 {
		return nil
	}
	d := mp.free[len(mp.free)-1]
	mp.free = mp.free[:len(mp.free)-1]
	return d
}

// mysqlFingerprint sums up a database's definition: columns, indexes,
// routines, CHECK constraints and triggers.
const mysqlFingerprint = `SELECT md5(concat_ws('|',
  (SELECT group_concat(concat_ws(' ', table_name, column_name, column_type, is_nullable, column_default, extra, generation_expression)
     ORDER BY table_name, ordinal_position SEPARATOR '\n') FROM information_schema.columns WHERE table_schema = ?),
  (SELECT group_concat(concat_ws(' ', table_name, index_name, seq_in_index, column_name, non_unique)
     ORDER BY table_name, index_name, seq_in_index SEPARATOR '\n') FROM information_schema.statistics WHERE table_schema = ?),
  (SELECT group_concat(concat_ws(' ', routine_name, md5(routine_definition)) ORDER BY routine_name SEPARATOR '\n')
     FROM information_schema.routines WHERE routine_schema = ?),
  (SELECT group_concat(concat_ws(' ', table_name, constraint_name, check_clause) ORDER BY table_name, constraint_name SEPARATOR '\n')
     FROM information_schema.check_constraints WHERE constraint_schema = ?),
  (SELECT group_concat(concat_ws(' ', trigger_name, md5(action_statement)) ORDER BY trigger_name SEPARATOR '\n')
     FROM information_schema.triggers WHERE trigger_schema = ?)))`

func mysqlDefinition(ctx context.Context, admin *sql.DB, name string) (string, error) {
	var fp sql.NullString
	if err := admin.QueryRowContext(ctx, mysqlFingerprint, name, name, name, name, name).Scan(&fp); err != nil {
		return "", fmt.Errorf("read the definition of %s: %w", name, err)
	}
	return fp.String, nil
}

// seedChecksum is the checksum of the kept tables' rows.
func seedChecksum(ctx context.Context, admin *sql.DB, name string, tables []string) (string, error) {
	if len(tables) == 0 {
		return "", nil
	}
	qualified := make([]string, len(tables))
	for i, tbl := range tables {
		qualified[i] = "`" + name + "`.`" + tbl + "`"
	}
	rows, err := admin.QueryContext(ctx, "CHECKSUM TABLE "+strings.Join(qualified, ", "))
	if err != nil {
		return "", fmt.Errorf("checksum the kept tables of %s: %w", name, err)
	}
	defer rows.Close()
	var sums []string
	for rows.Next() {
		var tbl string
		var sum sql.NullInt64
		if err := rows.Scan(&tbl, &sum); err != nil {
			return "", fmt.Errorf("checksum the kept tables of %s: %w", name, err)
		}
		sums = append(sums, tbl+"="+strconv.FormatInt(sum.Int64, 10))
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("checksum the kept tables of %s: %w", name, err)
	}
	return strings.Join(sums, ","), nil
}

// captureMySQL records what the reset of the freshly migrated database
// needs.
func captureMySQL(ctx context.Context, admin *sql.DB, name string) (*keptDatabase, error) {
	d := &keptDatabase{name: name}
	var err error
	if d.fingerprint, err = mysqlDefinition(ctx, admin, name); err != nil {
		return nil, err
	}
	rows, err := admin.QueryContext(ctx, `SELECT table_name, auto_increment IS NOT NULL FROM information_schema.tables
  WHERE table_schema = ? AND table_type = 'BASE TABLE' ORDER BY table_name`, name)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", name, err)
	}
	type table struct {
		name    string
		counter bool
	}
	var tables []table
	for rows.Next() {
		var tb table
		if err := rows.Scan(&tb.name, &tb.counter); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the tables of %s: %w", name, err)
		}
		tables = append(tables, tb)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", name, err)
	}
	for _, tb := range tables {
		var any int
		err := admin.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM `"+name+"`.`"+tb.name+"`)").Scan(&any)
		if err != nil {
			return nil, fmt.Errorf("read table %s: %w", tb.name, err)
		}
		switch {
		case any == 1:
			d.seeded = append(d.seeded, tb.name)
		case tb.counter:
			d.emptied = append(d.emptied, tb.name)
			d.counted = append(d.counted, tb.name)
		default:
			d.emptied = append(d.emptied, tb.name)
		}
	}
	if d.seedSum, err = seedChecksum(ctx, admin, name, d.seeded); err != nil {
		return nil, err
	}
	return d, nil
}

// giveBack empties d and frees it, or drops it when its test changed its
// definition or kept rows, or it cannot be emptied.
func (mp *mysqlPool) giveBack(ctx context.Context, admin *sql.DB, d *keptDatabase) error {
	err := awaitMySQLIdle(ctx, admin, d.name)
	if err == nil {
		err = resetMySQL(ctx, admin, d)
	}
	if err == nil {
		mp.mu.Lock()
		mp.free = append(mp.free, d)
		mp.mu.Unlock()
		return nil
	}
	if _, dropErr := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+d.name+"`"); dropErr != nil {
		return fmt.Errorf("drop test database %s: %w", d.name, dropErr)
	}
	return nil
}

// awaitMySQLIdle waits until no other session runs a statement in the
// database: a stopped client's statement can still be running on the
// server after its connection closed.
func awaitMySQLIdle(ctx context.Context, admin *sql.DB, name string) error {
	for {
		var busy int
		err := admin.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.processlist
  WHERE db = ? AND id <> connection_id() AND command NOT IN ('Sleep', 'Daemon')`, name).Scan(&busy)
		if err != nil {
			return fmt.Errorf("wait for the statements in %s to end: %w", name, err)
		}
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the statements in %s to end: %w", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// resetMySQL checks d's definition and kept rows, then empties it on one
// connection with foreign key checks off (every row goes: no reference is
// left dangling).
func resetMySQL(ctx context.Context, admin *sql.DB, d *keptDatabase) error {
	fp, err := mysqlDefinition(ctx, admin, d.name)
	if err != nil {
		return err
	}
	if fp != d.fingerprint {
		return fmt.Errorf("test database %s: definition changed by its test", d.name)
	}
	sum, err := seedChecksum(ctx, admin, d.name, d.seeded)
	if err != nil {
		return err
	}
	if sum != d.seedSum {
		return fmt.Errorf("test database %s: the migrations' rows changed by its test", d.name)
	}
	conn, err := admin.Conn(ctx)
	if err != nil {
		return fmt.Errorf("empty test database %s: %w", d.name, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return fmt.Errorf("empty test database %s: %w", d.name, err)
	}
	// Back on for whoever takes the connection next.
	defer func() { _, _ = conn.ExecContext(context.Background(), "SET SESSION foreign_key_checks = 1") }()
	for _, tbl := range d.emptied {
		if _, err := conn.ExecContext(ctx, "DELETE FROM `"+d.name+"`.`"+tbl+"`"); err != nil {
			return fmt.Errorf("empty %s.%s: %w", d.name, tbl, err)
		}
	}
	for _, tbl := range d.counted {
		if _, err := conn.ExecContext(ctx, "ALTER TABLE `"+d.name+"`.`"+tbl+"` AUTO_INCREMENT = 1"); err != nil {
			return fmt.Errorf("reset the counter of %s.%s: %w", d.name, tbl, err)
		}
	}
	return nil
}

// sweepMySQL drops the kept databases of processes on this host that are
// gone.
func sweepMySQL(ctx context.Context, t testing.TB, admin *sql.DB) {
	rows, err := admin.QueryContext(ctx, `SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?`, pooledSchemaPrefix+"%")
	if err != nil {
		return
	}
	var names []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names = append(names, n)
		}
	}
	rows.Close()
	for _, name := range names {
		pid, gone := keptByGoneProcess(name)
		if !gone {
			continue
		}
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Logf("drop a test database left by process %d: %v", pid, err)
		}
	}
}

// dropKeptMySQL drops the databases MigratedMySQLDatabase kept.
func dropKeptMySQL() {
	mysqlPoolsMu.Lock()
	defer mysqlPoolsMu.Unlock()
	if mysqlAdmin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, mp := range mysqlPools {
		mp.mu.Lock()
		for _, d := range mp.free {
			_, _ = mysqlAdmin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+d.name+"`")
		}
		mp.free = nil
		mp.mu.Unlock()
	}
}
