package mysql_test

import (
	"context"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestKeptDatabaseEmptied checks what the tests' kept databases promise:
// the next test on a database finds no job of the last one, and its first
// job gets id 1, as on a freshly migrated database; a database whose test
// changed its definition is not handed out again.
func TestKeptDatabaseEmptied(t *testing.T) {
	ctx := context.Background()
	insertOne := func(t *testing.T, c *spool.Client) int64 {
		res, err := c.Insert(ctx, conformance.NoteArgs{N: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	var first string
	t.Run("write", func(t *testing.T) {
		be := newBackend(t, nil)
		first = be.Database()
		c, err := spool.NewClient(be, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			insertOne(t, c)
		}
	})
	t.Run("reuse", func(t *testing.T) {
		be := newBackend(t, nil)
		if be.Database() != first {
			// The free databases are taken last in, first out, and no
			// parallel test runs beside this one.
			t.Fatalf("got database %s, want the kept %s", be.Database(), first)
		}
		c, err := spool.NewClient(be, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := c.JobList(ctx, &spool.JobListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 0 {
			t.Fatalf("kept database holds %d jobs of the last test", len(jobs))
		}
		if id := insertOne(t, c); id != 1 {
			t.Fatalf("first job's id %d, want 1 as on a fresh database", id)
		}
		if _, err := testdb.MySQLAdmin(t).ExecContext(ctx, "ALTER TABLE `"+first+"`.spool_jobs ADD COLUMN extra int"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("changed not kept", func(t *testing.T) {
		be := newBackend(t, nil)
		if be.Database() == first {
			t.Fatalf("got database %s again after its test changed it", first)
		}
		var n int
		if err := testdb.MySQLAdmin(t).QueryRowContext(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", first).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("changed database %s was not dropped", first)
		}
	})
}
