package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEnqueueUnique: spool enqueue --unique-key prints the holder's id and
// "duplicate" when the key is taken, and inserts nothing; other kinds and
// other keys insert; bad unique flags are usage errors that insert nothing;
// jobs show names the key.
func TestEnqueueUnique(t *testing.T) {
	db := sqliteStore(t)
	first := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "mail", "--unique-key", "user-7").Stdout)
	if strings.Contains(first, "duplicate") {
		t.Fatalf("first insert said %q", first)
	}
	again := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "mail", "--unique-key", "user-7", "--args", `{"other":1}`).Stdout)
	if again != first+" duplicate" {
		t.Fatalf("second insert printed %q, want %q", again, first+" duplicate")
	}
	var res struct {
		ID        int64 `json:"id"`
		Duplicate bool  `json:"duplicate"`
	}
	out := mustSpool(t, "enqueue", "--database-url", db, "--kind", "mail", "--unique-key", "user-7", "--json").Stdout
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Duplicate || strings.TrimSpace(first) != jsonInt(res.ID) {
		t.Fatalf("--json printed %s (%v), want the holder %s as a duplicate", out, err, first)
	}
	if r := strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "sms", "--unique-key", "user-7").Stdout); strings.Contains(r, "duplicate") {
		t.Fatalf("same key, other kind: %q, want a new job", r)
	}
	args := `{"to":"a@example.com","body":"x"}`
	byField := func(body string) string {
		return strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "mail", "--unique-field", "to",
			"--args", strings.Replace(args, `"x"`, body, 1)).Stdout)
	}
	f1 := byField(`"x"`)
	if f2 := byField(`"y"`); f2 != f1+" duplicate" {
		t.Fatalf("same field, other body: %q, want %q", f2, f1+" duplicate")
	}
	for _, bad := range [][]string{
		{"--unique-key", ""},
		{"--unique-state", "running"},
		{"--unique-period", "0s"},
		{"--unique-period", "-1h"},
	} {
		if r := runSpool(t, append([]string{"enqueue", "--database-url", db, "--kind", "mail"}, bad...)...); r.Code != 2 {
			t.Errorf("enqueue %v: exit %d, want 2 (stderr %s)", bad, r.Code, r.Stderr)
		}
	}
	var jobs []json.RawMessage
	if err := json.Unmarshal([]byte(mustSpool(t, "jobs", "list", "--json", "--database-url", db).Stdout), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d jobs stored, want 3", len(jobs))
	}
	show := mustSpool(t, "jobs", "show", first, "--database-url", db).Stdout
	if !strings.Contains(show, "held while available, scheduled, retryable, running, completed") {
		t.Fatalf("jobs show does not name the key:\n%s", show)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
