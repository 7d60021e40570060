package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestQueuesPauseResume: spool queues pause stores the pause (a later
// process lists it, with an empty queue paused with --force too), resume
// undoes it, and a missing or impossible name is a usage error that
// changes nothing.
func TestQueuesPauseResume(t *testing.T) {
	db := sqliteStore(t)
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail")
	list := func() map[string]queueJSON {
		t.Helper()
		var qs []queueJSON
		if err := json.Unmarshal([]byte(mustSpool(t, "queues", "--json", "--database-url", db).Stdout), &qs); err != nil {
			t.Fatal(err)
		}
		out := map[string]queueJSON{}
		for _, q := range qs {
			out[q.Queue] = q
		}
		return out
	}
	if r := mustSpool(t, "queues", "pause", "mail", "--database-url", db); !strings.Contains(r.Stdout, "queue mail paused") {
		t.Errorf("pause said %q", r.Stdout)
	}
	mustSpool(t, "queues", "pause", "reports", "--force", "--database-url", db)
	qs := list()
	if qs["mail"].PausedSince == nil || qs["mail"].Total != 1 || qs["reports"].PausedSince == nil || qs["reports"].Total != 0 {
		t.Fatalf("queues after pause: %+v", qs)
	}
	if r := mustSpool(t, "queues", "--database-url", db); !strings.Contains(r.Stdout, "PAUSED") || !strings.Contains(r.Stdout, "since ") {
		t.Errorf("table does not show the pause:\n%s", r.Stdout)
	}
	for _, args := range [][]string{{"queues", "pause"}, {"queues", "pause", "a", "b"}, {"queues", "pause", "a b"}, {"queues", "stop", "mail"}} {
		if r := runSpool(t, append(args, "--database-url", db)...); r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2", args, r.Code)
		}
	}
	mustSpool(t, "queues", "resume", "mail", "--database-url", db)
	mustSpool(t, "queues", "resume", "mail", "--database-url", db) // idempotent
	qs = list()
	if qs["mail"].PausedSince != nil || qs["reports"].PausedSince == nil || len(qs) != 2 {
		t.Fatalf("queues after resume: %+v", qs)
	}
}

// TestQueuesKeys: spool enqueue --flow-key stores the key, spool queues keys
// lists the queue's keys busiest first with their pending jobs (jobs
// without a key as their own key), and a bad key or limit writes nothing.
func TestQueuesKeys(t *testing.T) {
	db := sqliteStore(t)
	for _, k := range []string{"acme", "acme", "beta"} {
		mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail", "--flow-key", k)
	}
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail")
	var use []struct {
		Key     string `json:"key"`
		Running int    `json:"running"`
		Pending int    `json:"pending"`
	}
	if err := json.Unmarshal([]byte(mustSpool(t, "queues", "keys", "mail", "--json", "--database-url", db).Stdout), &use); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(use); got != "[{acme 0 2} { 0 1} {beta 0 1}]" {
		t.Fatalf("keys %s, want acme (2 pending) first, then the jobs without a key and beta", got)
	}
	if r := mustSpool(t, "queues", "keys", "mail", "--limit", "1", "--database-url", db); !strings.Contains(r.Stdout, "acme") || strings.Contains(r.Stdout, "beta") {
		t.Fatalf("--limit 1 printed:\n%s", r.Stdout)
	}
	if r := runSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail", "--flow-key", "a\x01b"); r.Code == 0 || !strings.Contains(r.Stderr, "flow key") {
		t.Fatalf("a key with a control character: exit %d, %q", r.Code, r.Stderr)
	}
	for _, args := range [][]string{{"queues", "keys"}, {"queues", "keys", "mail", "--limit", "0"}} {
		if r := runSpool(t, append(args, "--database-url", db)...); r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2", args, r.Code)
		}
	}
	var qs []queueJSON
	if err := json.Unmarshal([]byte(mustSpool(t, "queues", "--json", "--database-url", db).Stdout), &qs); err != nil || len(qs) != 1 || qs[0].Total != 4 {
		t.Fatalf("queues after the refused insert: %+v, %v", qs, err)
	}
}

// TestJobsPrune: spool jobs prune deletes only finished jobs of the named
// states older than the age, and bad flags are usage errors that delete
// nothing.
func TestJobsPrune(t *testing.T) {
	db := sqliteStore(t)
	var ids []string
	for range 3 {
		ids = append(ids, strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "k").Stdout))
	}
	mustSpool(t, "jobs", "cancel", ids[0], "--database-url", db)
	mustSpool(t, "jobs", "cancel", ids[1], "--database-url", db)
	for _, args := range [][]string{
		{"jobs", "prune", "--older-than", "1ms"},
		{"jobs", "prune", "--state", "cancelled"},
		{"jobs", "prune", "--state", "available", "--older-than", "1ms"},
		{"jobs", "prune", "--state", "cancelled", "--older-than", "-1s"},
		{"jobs", "prune", "--state", "cancelled", "--older-than", "1ms", "--batch", "0"},
	} {
		if r := runSpool(t, append(args, "--database-url", db)...); r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2", args, r.Code)
		}
	}
	var res pruneJSON
	r := mustSpool(t, "jobs", "prune", "--state", "cancelled", "--older-than", "1h", "--json", "--database-url", db)
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res.Deleted != 0 {
		t.Fatalf("prune of jobs cancelled under an hour ago: %+v %v", res, err)
	}
	time.Sleep(2 * time.Millisecond) // the cancellations are now over a millisecond old
	r = mustSpool(t, "jobs", "prune", "--state", "cancelled", "--state", "completed", "--older-than", "1ms", "--batch", "1", "--database-url", db)
	if !strings.Contains(r.Stdout, "pruned 2 cancelled/completed jobs") {
		t.Fatalf("prune said %q, want 2 pruned", r.Stdout)
	}
	if got := listJobs(t, db); len(got) != 1 || fmt.Sprint(got[0].ID) != ids[2] {
		t.Fatalf("jobs left: %+v, want only job %s", got, ids[2])
	}
}

// TestJobsBulk: spool jobs retry, cancel and delete with filter flags change
// the jobs that match, print how many, change nothing on a second run, and
// refuse a missing filter or an id beside filters with exit 2.
func TestJobsBulk(t *testing.T) {
	db := sqliteStore(t)
	for range 3 {
		mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail")
	}
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "reports")
	if r := mustSpool(t, "jobs", "cancel", "--queue", "mail", "--batch", "2", "--database-url", db); r.Stdout != "cancelled 3 jobs\n" {
		t.Fatalf("cancel said %q", r.Stdout)
	}
	if r := mustSpool(t, "jobs", "cancel", "--queue", "mail", "--database-url", db); r.Stdout != "cancelled 0 jobs\n" {
		t.Fatalf("second cancel said %q", r.Stdout)
	}
	var res bulkJSON
	out := mustSpool(t, "jobs", "retry", "--state", "cancelled", "--queue", "mail", "--json", "--database-url", db).Stdout
	if err := json.Unmarshal([]byte(out), &res); err != nil || res != (bulkJSON{Action: "retry", Changed: 3}) {
		t.Fatalf("retry printed %s (%v)", out, err)
	}
	if r := mustSpool(t, "jobs", "delete", "--kind", "k", "--state", "available", "--database-url", db); r.Stdout != "deleted 4 jobs\n" {
		t.Fatalf("delete said %q", r.Stdout)
	}
	for _, args := range [][]string{
		{"jobs", "delete"},
		{"jobs", "delete", "--batch", "5"},
		{"jobs", "retry", "1", "--queue", "mail"},
		{"jobs", "cancel", "--state", "finished"},
		{"jobs", "delete", "--queue", "a b"},
		{"jobs", "delete", "--queue", "mail", "--created-before", "yesterday"},
	} {
		if r := runSpool(t, append(args, "--database-url", db)...); r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2", args, r.Code)
		}
	}
}
