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
	"github.com/spoolq/spool/internal/conformance"
	"github.com/spoolq/spool/internal/testdb"
)

// TestSQLEnqueue enqueues with CALL spool_enqueue inside an application's
// transaction, as another language would: the job exists only if the
// transaction commits, and a Go worker runs it with the arguments given.
func TestSQLEnqueue(t *testing.T) {
	t.Parallel()
	be := testdb.MySQL(t, nil)
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
	be := testdb.MySQL(t, nil)
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
