package mysql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
)

// lockStore takes every table of be's database with LOCK TABLES ... WRITE
// on a connection of its own (another session): every statement of the
// backend's calls waits behind it, for the table's metadata lock
// (conformance.Harness.Lock).
func lockStore(t *testing.T, be backend.Backend) conformance.StoreLock {
	ctx := context.Background()
	mb := be.(*mysql.Backend)
	db := mb.DB()
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'", mb.Database())
	if err != nil {
		t.Fatalf("lock: list the tables: %v", err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatalf("lock: list the tables: %v", err)
		}
		tables = append(tables, "`"+name+"` WRITE")
	}
	if err := rows.Close(); err != nil {
		t.Fatalf("lock: list the tables: %v", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+strings.Join(tables, ", ")); err != nil {
		_ = conn.Close()
		t.Fatalf("lock: %v", err)
	}
	return conformance.StoreLock{
		Waiting: func(ctx context.Context) (bool, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE db = ? AND state LIKE 'Waiting for table%'", mb.Database()).Scan(&n)
			return n > 0, err
		},
		Unlock: func() {
			_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
			_ = conn.Close()
		},
	}
}
