package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testInsertUnmigrated: every way of inserting into a store that was never
// migrated fails with the error Start gives there (ErrSchemaNotMigrated,
// saying to run spool migrate) and writes nothing; once the store is
// migrated, the same client inserts.
func testInsertUnmigrated(t *testing.T, h Harness) {
	if h.NewUnmigrated == nil {
		t.Fatal("Harness.NewUnmigrated is nil: give the suite a store that was never migrated, " +
			"or, for a store with no schema to migrate, name InsertUnmigrated in Exceptions with the reason")
	}
	ctx := context.Background()
	be := h.NewUnmigrated(t)
	v, err := be.SchemaVersion(ctx)
	if err != nil {
		t.Fatalf("schema version of an unmigrated store: %v", err)
	}
	if v.Current != 0 {
		t.Fatalf("NewUnmigrated gave a store at schema version %d, want 0", v.Current)
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[NoteArgs]) error { return nil }))
	c := newClient(t, be, fastConfig(ws, 1))
	startErr := c.Start(ctx)
	if !errors.Is(startErr, spool.ErrSchemaNotMigrated) {
		t.Fatalf("start on an unmigrated store: %v, want ErrSchemaNotMigrated", startErr)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrSchemaNotMigrated) || !strings.Contains(err.Error(), "run spool migrate") {
			t.Errorf("%s into an unmigrated store: %v; want the error Start gives (%v)", what, err, startErr)
		}
	}
	_, err = c.Insert(ctx, NoteArgs{N: 1}, nil)
	check("Insert", err)
	_, err = c.Insert(ctx, NoteArgs{N: 2}, &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "once"}})
	check("Insert of a unique job", err)
	_, err = c.InsertMany(ctx, Notes(10, 3))
	check("InsertMany", err)
	// Large enough for a backend's bulk path (COPY on PostgreSQL).
	_, err = c.InsertManyFast(ctx, Notes(100, 1000))
	check("InsertManyFast", err)
	tx := h.BeginTx(t, be)
	_, err = c.InsertTx(ctx, btx(tx), NoteArgs{N: 3}, nil)
	check("InsertTx", err)
	_ = tx.Rollback(ctx) // the failed insert may have aborted it

	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	id := insert(t, c, NoteArgs{N: 4}, nil)
	jobs, err := be.JobList(ctx, &backend.JobListParams{Limit: 10})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("after migrating and one insert the store holds %d jobs, want only job %d", len(jobs), id)
	}
}
