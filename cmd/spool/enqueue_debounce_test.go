package main

import (
	"strings"
	"testing"
)

// TestEnqueueDebounce: spool enqueue --debounce makes a job on the first
// insert and moves it on the next ("ID debounced"); --debounce-max and
// --debounce-replace need --debounce, and bad values are usage errors that
// insert nothing.
func TestEnqueueDebounce(t *testing.T) {
	db := sqliteStore(t)
	first := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "reindex", "--unique-key", "user-7",
		"--debounce", "1h", "--debounce-max", "2h").Stdout)
	if strings.Contains(first, " ") {
		t.Fatalf("first debounced insert printed %q, want a bare id", first)
	}
	again := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "reindex", "--unique-key", "user-7",
		"--debounce", "1h", "--debounce-max", "2h", "--debounce-replace", "--args", `{"n":2}`).Stdout)
	if again != first+" debounced" {
		t.Fatalf("second insert printed %q, want %q", again, first+" debounced")
	}
	show := mustSpool(t, "jobs", "show", first, "--database-url", db).Stdout
	if !strings.Contains(show, `"n":2`) && !strings.Contains(show, `"n": 2`) {
		t.Fatalf("jobs show after --debounce-replace:\n%s\nwant the args {\"n\":2}", show)
	}
	for _, bad := range [][]string{
		{"--debounce", "0s"},
		{"--debounce-max", "10s"},
		{"--debounce-replace"},
		{"--debounce", "2s", "--debounce-max", "-1s"},
		{"--debounce", "2s", "--delay", "1s"},
		{"--debounce", "2s", "--unique-state", "completed"},
	} {
		if r := runSpool(t, append([]string{"enqueue", "--database-url", db, "--kind", "reindex"}, bad...)...); r.Code != 2 {
			t.Errorf("enqueue %v: exit %d, want 2 (stderr %s)", bad, r.Code, r.Stderr)
		}
	}
	if out := mustSpool(t, "jobs", "list", "--database-url", db).Stdout; strings.Count(out, "reindex") != 1 {
		t.Fatalf("jobs list:\n%s\nwant one reindex job", out)
	}
}
