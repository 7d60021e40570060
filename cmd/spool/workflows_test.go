package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// TestWorkflowsAndBatches: spool workflows list and show give a workflow's
// tasks with their states and dependencies, cancel cancels the unfinished
// ones; spool batches list and show give a batch's progress and members.
func TestWorkflowsAndBatches(t *testing.T) {
	db := sqliteStore(t)
	if r := mustSpool(t, "workflows", "list", "--database-url", db); !strings.Contains(r.Stdout, "no workflows") {
		t.Fatalf("an empty store printed %q", r.Stdout)
	}
	ctx := context.Background()
	be, err := backend.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = be.Close() }()
	c, err := spool.NewClient(be, &spool.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	w := spool.NewWorkflow("report")
	w.Add("extract", tickArgs{}, nil)
	w.Add("publish", tickArgs{}, nil, spool.After("extract"))
	res, err := c.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(res.ID, 10)

	r := mustSpool(t, "workflows", "list", "--database-url", db, "--json")
	var list []spool.WorkflowSummary
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || len(list) != 1 || list[0].Counts[backend.StateWaiting] != 1 {
		t.Fatalf("workflows list --json: %v %+v", err, list)
	}
	r = mustSpool(t, "workflows", "show", id, "--database-url", db)
	for _, want := range []string{`"report"`, "publish", "waiting", "extract"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("workflows show lacks %q:\n%s", want, r.Stdout)
		}
	}
	r = mustSpool(t, "workflows", "cancel", id, "--database-url", db)
	if !strings.Contains(r.Stdout, "cancelled 2 tasks") {
		t.Errorf("workflows cancel: %q", r.Stdout)
	}
	r = mustSpool(t, "workflows", "retry", id, "--database-url", db)
	if !strings.Contains(r.Stdout, "retried 2 tasks") {
		t.Errorf("workflows retry: %q", r.Stdout)
	}
	if r := runSpool(t, "workflows", "retry", id, "--database-url", db); r.Code != 1 || !strings.Contains(r.Stderr, "unfinished tasks") {
		t.Errorf("retry of a running workflow: exit %d, %q", r.Code, r.Stderr)
	}
	if r := runSpool(t, "workflows", "show", "999", "--database-url", db); r.Code != 1 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("show of no workflow: exit %d, %q", r.Code, r.Stderr)
	}
	if r := runSpool(t, "workflows", "show", "--database-url", db); r.Code != 2 {
		t.Errorf("show without an id: exit %d, want 2", r.Code)
	}

	b, err := c.InsertBatch(ctx, spool.BatchOpts{Name: "import", OnComplete: &spool.BatchCallback{Args: tickArgs{}}},
		[]spool.InsertManyParams{{Args: tickArgs{}}, {Args: tickArgs{}}})
	if err != nil {
		t.Fatal(err)
	}
	r = mustSpool(t, "batches", "list", "--database-url", db)
	if !strings.Contains(r.Stdout, "import") || !strings.Contains(r.Stdout, "sealed, running") {
		t.Errorf("batches list:\n%s", r.Stdout)
	}
	r = mustSpool(t, "batches", "show", strconv.FormatInt(b.ID, 10), "--database-url", db, "--json")
	var shown struct {
		Total   int               `json:"total"`
		Members []json.RawMessage `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &shown); err != nil || shown.Total != 2 || len(shown.Members) != 2 {
		t.Errorf("batches show --json: %v %s", err, r.Stdout)
	}
	r = mustSpool(t, "batches", "retry", strconv.FormatInt(b.ID, 10), "--database-url", db)
	if !strings.Contains(r.Stdout, "retried 0 discarded members") {
		t.Errorf("batches retry: %q", r.Stdout)
	}
}
