package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/conformance"
)

// FuzzSQLEnqueue calls spool_enqueue on the MariaDB test server with any
// values, from a session whose SQL mode is lax (the mode that lets values
// be truncated on the way in). A call either stores a job that every Go-side
// limit accepts and that holds exactly the values passed, or fails with a
// data exception (SQLSTATE class 22) and writes nothing.
func FuzzSQLEnqueue(f *testing.F) {
	be := newBackend(f, nil)
	ctx := context.Background()
	app := userDB(f, be.Database(), map[string]string{"sql_mode": "''"})
	seeds := []struct {
		kind, args, queue string
		prio              float64
		runAt             string
		maxAtt            float64
		tags, meta        string
	}{
		{"note", `{"n": 1}`, "default", 0, "2030-01-01 00:00:00", 25, `[]`, `{}`},
		{"email", `[1, "two", {"three": [3.0, null, true]}]`, "mail.high-1", 100, "9999-12-31 23:59:59.999999", 1000, `["a", "b:c"]`, `{"trace": "x"}`},
		{"", `{}`, "default", 0, "", 25, `[]`, `{}`},
		{"note", `{"s": "\u0000"}`, "default", 0, "", 25, `[]`, `{}`},
		{"note", `{"s": "\\u0000"}`, "default", 0, "", 25, `[]`, `{}`},
		{"note", `{"s": "\\\u0000"}`, "default", 0, "", 25, `[]`, `{"\u0000": 1}`},
		{"note", strings.Repeat("[", 32) + strings.Repeat("]", 32), "default", 0, "", 25, `[]`, `{}`},
		{"note", `{}`, ".q", 1.5, "10000-01-01 00:00:00", 0, `["has space"]`, `[]`},
		{"note", `{}`, "q", 1e20, "1969-12-31 23:59:59", 2.5, `"a"`, `{"a": {"b": {}}}`},
		{"\u212a", `"just a string"`, "default", 50, "2026-02-30", 1, `[1]`, `null`},
	}
	for _, sd := range seeds {
		f.Add(sd.kind, sd.args, sd.queue, sd.prio, sd.runAt, sd.maxAtt, sd.tags, sd.meta)
	}
	f.Fuzz(func(t *testing.T, kind, args, queue string, prio float64, runAt string, maxAtt float64, tags, meta string) {
		conn, err := app.Conn(ctx) // LAST_INSERT_ID is the session's
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var at any // "" stands for NULL: now
		if runAt != "" {
			at = runAt
		}
		before := countJobs(t, be)
		_, err = conn.ExecContext(ctx, "CALL spool_enqueue(?, ?, ?, ?, ?, ?, ?, ?)", kind, args, queue, prio, at, maxAtt, tags, meta)
		if err != nil {
			var me *drv.MySQLError
			if !errors.As(err, &me) || string(me.SQLState[:2]) != "22" {
				t.Fatalf("spool_enqueue(%q, %q, %q, %v, %q, %v, %q, %q) failed with something other than a data exception: %v",
					kind, args, queue, prio, runAt, maxAtt, tags, meta, err)
			}
			if after := countJobs(t, be); after != before {
				t.Fatalf("a refused call wrote %d rows: %v", after-before, err)
			}
			return
		}
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		j, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatalf("job %d enqueued from SQL cannot be read: %v", id, err)
		}
		if err := conformance.WithinLimits(j); err != nil {
			t.Fatalf("spool_enqueue(%q, %q, %q, %v, %q, %v, %q, %q) stored a job the Go API would refuse: %v",
				kind, args, queue, prio, runAt, maxAtt, tags, meta, err)
		}
		var same bool
		if err := conn.QueryRowContext(ctx, `SELECT JSON_EQUALS(args, ?) AND JSON_EQUALS(metadata, ?) AND JSON_EQUALS(tags, ?)
			FROM spool_jobs WHERE id = ?`, args, meta, tags, id).Scan(&same); err != nil {
			t.Fatal(err)
		}
		if !same || j.Kind != kind || j.Queue != queue || float64(j.Priority) != prio || float64(j.MaxAttempts) != maxAtt {
			t.Fatalf("spool_enqueue(%q, %q, %q, %v, %q, %v, %q, %q) stored something else: %+v", kind, args, queue, prio, runAt, maxAtt, tags, meta, j)
		}
	})
}
