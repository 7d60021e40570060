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
