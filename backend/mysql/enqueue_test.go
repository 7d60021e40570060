package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/conformance"
)

// TestSQLEnqueue enqueues with CALL spool_enqueue inside an application's
// transaction, as another language would: the job exists only if the
// transaction commits, and a Go worker runs it with the arguments given.
func TestSQLEnqueue(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	ran := make(chan *spool.Job[conformance.NoteArgs], 2)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		ran <- j
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, PollInterval: 20 * time.Millisecond,
		Queues: map[string]spool.QueueConfig{"mail": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	app := userDB(t, be.Database(), nil)
	if _, err := app.ExecContext(ctx, "CREATE TABLE orders (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	enqueue := func(tx *sql.Tx, n int) int64 {
		t.Helper()
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES (?)", n); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `CALL spool_enqueue('note', JSON_OBJECT('n', ?), 'mail', 3, NULL, 5, '["from-sql"]', '{"source":"sql"}')`, n); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Rolled back: neither the order nor the job exists.
	tx, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack := enqueue(tx, 1)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err = app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := enqueue(tx, 7)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-ran:
		if j.ID != id || j.Args.N != 7 || j.Queue != "mail" || j.Priority != 3 || j.MaxAttempts != 5 || len(j.Tags) != 1 || j.Tags[0] != "from-sql" {
			t.Fatalf("worker saw %+v args %+v", j.JobRow, j.Args)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the job enqueued from SQL never ran")
	}
	if _, err := be.JobGet(ctx, rolledBack); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("rolled-back job: %v", err)
	}
	// Defaults: NULL takes them; run_at in the future schedules.
	if _, err := app.ExecContext(ctx, `CALL spool_enqueue('note', NULL, NULL, NULL, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	rows, err := be.JobList(ctx, &backend.JobListParams{Queue: "default"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %d %v", len(rows), err)
	}
	if j := rows[0]; j.State != backend.StateScheduled || j.Priority != 0 || j.MaxAttempts != 25 || string(j.Args) != "{}" ||
		len(j.Tags) != 0 || string(j.Metadata) != "{}" || time.Until(j.RunAt) < 59*time.Minute {
		t.Fatalf("defaults: %+v", j)
	}
	// run_at NULL means now: the job is available at once, not scheduled a
	// microsecond ahead; a whole priority passed as 2.0 is kept as 2.
	if _, err := app.ExecContext(ctx, `CALL spool_enqueue('note', NULL, 'now', 2.0, NULL, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	rows, err = be.JobList(ctx, &backend.JobListParams{Queue: "now"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("list: %d %v", len(rows), err)
	}
	if j := rows[0]; j.State != backend.StateAvailable || j.Priority != 2 {
		t.Fatalf("run_at NULL: state %s priority %d, want available and 2", j.State, j.Priority)
	}
}

// TestSQLEnqueueValidates: every rule of the Go API is enforced by the
// procedure with SQLSTATE 22023, writing nothing, also in a session that is
// not strict (the routine runs in the strict mode it was created with, and
// takes text as LONGTEXT, so nothing is truncated on the way in).
func TestSQLEnqueueValidates(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	long := func(n int) string { return "'" + strings.Repeat("k", n) + "'" }
	cases := []struct{ name, kind, args, queue, prio, runAt, maxAtt, tags, meta, want string }{
		{"no kind", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind"},
		{"empty kind", "''", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind"},
		{"kind of 256 characters", long(256), "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind"},
		{"kind with a newline", "CONCAT('a', CHAR(10))", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind"},
		{"args not JSON", "'note'", "'{'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "args"},
		{"args over 1 MiB", "'note'", "JSON_OBJECT('s', REPEAT('x', 1048576))", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "args"},
		{"queue with SQL", "'note'", "NULL", `'x''; DROP TABLE spool_jobs; --'`, "NULL", "NULL", "NULL", "NULL", "NULL", "queue"},
		{"queue of 129 characters", "'note'", "NULL", long(129), "NULL", "NULL", "NULL", "NULL", "NULL", "queue"},
		{"queue with a trailing newline", "'note'", "NULL", "CONCAT('q', CHAR(10))", "NULL", "NULL", "NULL", "NULL", "NULL", "queue"},
		{"queue starting with a dot", "'note'", "NULL", "'.q'", "NULL", "NULL", "NULL", "NULL", "NULL", "queue"},
		{"queue with the Kelvin sign", "'note'", "NULL", "'\u212a'", "NULL", "NULL", "NULL", "NULL", "NULL", "queue"},
		{"priority -1", "'note'", "NULL", "NULL", "-1", "NULL", "NULL", "NULL", "NULL", "priority"},
		{"priority 101", "'note'", "NULL", "NULL", "101", "NULL", "NULL", "NULL", "NULL", "priority"},
		{"max_attempts 0", "'note'", "NULL", "NULL", "NULL", "NULL", "0", "NULL", "NULL", "max_attempts"},
		{"max_attempts 1001", "'note'", "NULL", "NULL", "NULL", "NULL", "1001", "NULL", "NULL", "max_attempts"},
		{"tags not an array", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", `'"a"'`, "NULL", "tags"},
		{"33 tags", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "CONCAT('[', REPEAT('\"t\",', 32), '\"t\"]')", "NULL", "tags"},
		{"tag with a space", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", `'["ok", "has space"]'`, "NULL", "tag"},
		{"tag not a string", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", `'["ok", 5]'`, "NULL", "tag"},
		{"tag of 65 characters", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "CONCAT('[\"', REPEAT('t', 65), '\"]')", "NULL", "tag"},
		{"metadata an array", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "'[1]'", "metadata"},
		{"metadata not JSON", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "'{'", "metadata"},
		{"fractional priority", "'note'", "NULL", "NULL", "1.5", "NULL", "NULL", "NULL", "NULL", "priority must be a whole number"},
		{"fractional max_attempts", "'note'", "NULL", "NULL", "NULL", "NULL", "2.5", "NULL", "NULL", "max_attempts must be a whole number"},
		{"run_at before 1970", "'note'", "NULL", "NULL", "NULL", "'1969-12-31 23:59:59'", "NULL", "NULL", "NULL", "run_at is out of range"},
		{"kind of invalid UTF-8", "_binary X'6197'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind must be valid UTF-8"},
		{"kind with a UTF-16 surrogate", "_binary X'61EDA080'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "kind must be valid UTF-8"},
		{"args of invalid UTF-8", "'note'", `CONCAT('{"s": "', _binary X'FF', '"}')`, "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "args must be valid UTF-8"},
		{"metadata of invalid UTF-8", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", `CONCAT('{"s": "', _binary X'C0AF', '"}')`, "metadata must be valid UTF-8"},
		{"args holding U+0000", "'note'", `'{"s": "a\\u0000b"}'`, "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "U+0000"},
		{"metadata holding U+0000", "'note'", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", `'{"k": "\\\\\\u0000"}'`, "U+0000"},
		{"args nested 32 deep", "'note'", "CONCAT(REPEAT('[', 32), REPEAT(']', 32))", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "nested at most 31 levels deep"},
	}
	for _, mode := range []string{"strict", "lax"} {
		params := map[string]string{}
		if mode == "lax" {
			params["sql_mode"] = "''"
		}
		app := userDB(t, be.Database(), params)
		for _, tc := range cases {
			call := "CALL spool_enqueue(" + strings.Join([]string{tc.kind, tc.args, tc.queue, tc.prio, tc.runAt, tc.maxAtt, tc.tags, tc.meta}, ", ") + ")"
			_, err := app.ExecContext(ctx, call)
			var me *drv.MySQLError
			if !errors.As(err, &me) || string(me.SQLState[:]) != "22023" || !strings.Contains(me.Message, tc.want) {
				t.Errorf("%s session, %s: %v, want SQLSTATE 22023 naming %s", mode, tc.name, err, tc.want)
			}
		}
		// A number that does not fit is an error too, never clamped.
		if _, err := app.ExecContext(ctx, "CALL spool_enqueue('note', NULL, NULL, 99999999999999999999, NULL, NULL, NULL, NULL)"); err == nil {
			t.Errorf("%s session: an out-of-range priority was accepted", mode)
		}
		// Run times that are no DATETIME(6) in range: refused, in a lax
		// session too (schema version 2 stored year 10000 as "now" there).
		for _, at := range []string{"'10000-01-01 00:00:00'", "'not a time'", "'0000-00-00 00:00:00'", "'2026-02-30 00:00:00'"} {
			_, err := app.ExecContext(ctx, "CALL spool_enqueue('note', NULL, NULL, NULL, "+at+", NULL, NULL, NULL)")
			var me *drv.MySQLError
			if !errors.As(err, &me) || string(me.SQLState[:]) != "22023" || !strings.Contains(me.Message, "run_at is out of range") {
				t.Errorf("%s session, run_at %s: %v, want SQLSTATE 22023 naming run_at", mode, at, err)
			}
		}
	}
	if n := countJobs(t, be); n != 0 {
		t.Fatalf("%d jobs written by refused calls", n)
	}
}

// TestSQLEnqueueStrictJSON: spool_enqueue takes exactly the JSON of RFC
// 8259, which every worker's decoder reads, though MariaDB's own parser
// takes more (escapes such as \0, numbers such as 1. or 1e).
func TestSQLEnqueueStrictJSON(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	app := userDB(t, be.Database(), nil)
	call := func(args string) error {
		_, err := app.ExecContext(ctx, "CALL spool_enqueue('note', ?, NULL, NULL, NULL, NULL, NULL, NULL)", args)
		return err
	}
	accepted := []string{
		`{"a": "x\\0", "b": "1. 1e -", "c": "\"\\\/\b\f\n\r\t\u00e9"}`,
		`[1e999, -0, 0.5e-3, 10E+2, 0, -12.25, true, false, null, {"true": "null"}]`,
		"{\n\t\"a\" :\r [ ] }",
	}
	for _, a := range accepted {
		if err := call(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	refused := []string{`{"a": "\0"}`, `{"a": "\x41"}`, `{"a": "\'"}`, `{"a": "\U0041"}`, `[1.]`, `[1.e5]`, `[1.5e]`, `[1E+]`, `[-]`, `{"a": [2, 3.]}`}
	for _, a := range refused {
		err := call(a)
		var me *drv.MySQLError
		if !errors.As(err, &me) || string(me.SQLState[:]) != "22023" || !strings.Contains(me.Message, "args must be valid JSON") {
			t.Errorf("%s: %v, want SQLSTATE 22023 saying args must be valid JSON", a, err)
		}
	}
	if n := countJobs(t, be); n != len(accepted) {
		t.Fatalf("%d jobs stored, want %d", n, len(accepted))
	}
	// The checks cost little on a large payload: 1 MiB of short strings.
	big := `["` + strings.Repeat(`ab", "`, 149000) + `x"]`
	start := time.Now()
	if err := call(big); err != nil {
		t.Fatalf("%d bytes of strings: %v", len(big), err)
	}
	t.Logf("spool_enqueue of %d bytes of args: %v", len(big), time.Since(start))
}
