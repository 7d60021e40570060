package backend_test

import (
	"testing"
	"testing/fstest"

	"github.com/spoolq/spool/backend"
)

func TestLoadMigrations(t *testing.T) {
	ms, err := backend.LoadMigrations(fstest.MapFS{
		"m/002_more.sql": {Data: []byte("B")},
		"m/001_init.sql": {Data: []byte("A")},
	}, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "init" || ms[1].SQL != "B" {
		t.Fatalf("%+v %v", ms, err)
	}
	for name, files := range map[string]fstest.MapFS{
		"gap":      {"m/001_a.sql": {}, "m/003_c.sql": {}},
		"bad name": {"m/init.sql": {}},
		"not sql":  {"m/001_a.txt": {}},
	} {
		if _, err := backend.LoadMigrations(files, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestUnapplied(t *testing.T) {
	a, b, stale := backend.LeaseRef{ID: 1, Fence: 1}, backend.LeaseRef{ID: 2, Fence: 1}, backend.LeaseRef{ID: 1, Fence: 0}
	id := func(l backend.LeaseRef) backend.LeaseRef { return l }
	if got := backend.Unapplied([]backend.LeaseRef{a, b}, []backend.LeaseRef{b, a}, id); got != nil {
		t.Fatalf("all applied: %v", got)
	}
	// A stale and a live lease on one job in one batch: only the stale one
	// is reported, though the counts differ by one.
	got := backend.Unapplied([]backend.LeaseRef{a, stale, b}, []backend.LeaseRef{a, b}, id)
	if len(got) != 1 || got[0] != stale {
		t.Fatalf("got %v, want [%v]", got, stale)
	}
}

// fakeRows serves fixed (queue, state, count) rows.
type fakeRows struct {
	rows [][3]any
	i    int
}

func (f *fakeRows) Next() bool { f.i++; return f.i <= len(f.rows) }
func (f *fakeRows) Err() error { return nil }
func (f *fakeRows) Scan(dest ...any) error {
	r := f.rows[f.i-1]
	*dest[0].(*string), *dest[1].(*string), *dest[2].(*int64) = r[0].(string), r[1].(string), r[2].(int64)
	return nil
}

func TestCollectQueueStats(t *testing.T) {
	got, err := backend.CollectQueueStats(&fakeRows{rows: [][3]any{
		{"a", "available", int64(2)}, {"a", "completed", int64(5)}, {"b", "running", int64(1)},
	}})
	if err != nil || len(got) != 2 || got[0].Queue != "a" || got[0].Counts[backend.StateCompleted] != 5 ||
		got[0].Counts[backend.StateAvailable] != 2 || got[1].Queue != "b" || got[1].Counts[backend.StateRunning] != 1 {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestParamDefaults(t *testing.T) {
	if got := (&backend.JobRescueParams{}).MaxOrDefault(); got != backend.DefaultRescueMax {
		t.Errorf("rescue max %d", got)
	}
	if got := (&backend.JobCleanupParams{Max: -1}).MaxOrDefault(); got != backend.DefaultCleanupMax {
		t.Errorf("cleanup max %d", got)
	}
	if got := (&backend.JobListParams{Limit: 7}).LimitOrDefault(); got != 7 {
		t.Errorf("list limit %d, want the 7 given", got)
	}
	if got := (&backend.JobListParams{}).LimitOrDefault(); got != backend.DefaultListLimit {
		t.Errorf("list limit %d", got)
	}
}
