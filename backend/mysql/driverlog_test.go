package mysql_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestDriverMessagesGoToLogger: when the server closes an idle pooled
// connection, the driver's notice reaches the backend's logger with its
// cause, not stderr through the standard log package.
func TestDriverMessagesGoToLogger(t *testing.T) {
	ctx := context.Background()
	name := testdb.NewMySQLDatabase(t)
	cfg, opts, err := mysql.ParseURL(testdb.MySQLDatabaseURL(name, nil))
	if err != nil {
		t.Fatal(err)
	}
	var logs conformance.LogBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	be, err := mysql.OpenConfig(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	db := be.DB()
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	// Kill every connection of the pool while it idles, and wait until the
	// server has closed them.
	admin := testdb.MySQLAdmin(t)
	rows, err := admin.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE db = ?", name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Fatal("the pool has no connection open on the server")
	}
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE db = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d killed connections still listed after 10 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after the kill: %v", err)
	}
	got := logs.String()
	if !strings.Contains(got, "discarded a pooled connection the server had closed while it was idle") || !strings.Contains(got, "closing bad idle connection") {
		t.Fatalf("the driver's notice did not reach the logger with its cause; logged:\n%s", got)
	}
}
