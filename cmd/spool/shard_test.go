package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestShardURL: the CLI opens a shard:// URL over two PostgreSQL schemas:
// migrate migrates both, enqueue places each queue on its shard (the id
// says which), queues and jobs list merge both, and a job is found,
// cancelled and shown by its id.
func TestShardURL(t *testing.T) {
	db := "shard://" + freshURL(t) + ";" + freshURL(t)
	mustSpool(t, "migrate", "--database-url", db)
	ids := map[string]int64{}
	shards := map[int64]bool{}
	for _, q := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		r := mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", q)
		id, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
		if err != nil {
			t.Fatalf("enqueue printed %q", r.Stdout)
		}
		ids[q] = id
		shards[id%256] = true
	}
	if len(shards) != 2 {
		t.Fatalf("8 queues all on one shard: %v", ids)
	}
	if jobs := listJobs(t, db); len(jobs) != 8 {
		t.Fatalf("jobs list: %d jobs, want 8 from both shards", len(jobs))
	}
	var qs []queueJSON
	if err := json.Unmarshal([]byte(mustSpool(t, "queues", "--json", "--database-url", db).Stdout), &qs); err != nil || len(qs) != 8 {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	id := strconv.FormatInt(ids["e"], 10)
	mustSpool(t, "jobs", "cancel", "--database-url", db, id)
	if r := mustSpool(t, "jobs", "show", "--database-url", db, id); !strings.Contains(r.Stdout, "cancelled") {
		t.Fatalf("job %s after cancel:\n%s", id, r.Stdout)
	}
	if r := runSpool(t, "queues", "--database-url", "shard://"+freshURL(t)+";nonsense"); r.Code == 0 {
		t.Fatal("a shard URL with a bad item opened")
	}
}
