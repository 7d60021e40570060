package dashtest_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// TestWorkflowPages: the workflows page lists a workflow with its tasks'
// states and a batch with its progress; a workflow's page shows its tasks
// by level (a task after those it waits for), and its cancel button
// cancels every unfinished task.
func TestWorkflowPages(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	w := spool.NewWorkflow("nightly")
	w.Add("extract", reportArgs{}, nil)
	w.Add("load", reportArgs{}, nil, spool.After("extract"))
	res, err := f.client.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.InsertBatch(ctx, spool.BatchOpts{Name: "import"}, []spool.InsertManyParams{{Args: reportArgs{}}, {Args: reportArgs{}}}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, serve(t, f))
	code, _, body := s.get("/workflows")
	if code != 200 {
		t.Fatalf("GET /workflows: %d", code)
	}
	for _, want := range []string{"nightly", "1 waiting, 1 available", "import", "0/2", "running"} {
		if !strings.Contains(body, want) {
			t.Errorf("workflows page lacks %q:\n%s", want, body)
		}
	}
	id := strconv.FormatInt(res.ID, 10)
	code, _, body = s.get("/workflows/" + id)
	if code != 200 || strings.Index(body, `data-task="extract"`) < 0 || strings.Index(body, `data-task="load"`) < strings.Index(body, `data-task="extract"`) ||
		!strings.Contains(body, "after extract") {
		t.Fatalf("GET /workflows/%s: %d\n%s", id, code, body)
	}
	if code, _ := s.post("/workflows/"+id+"/cancel", url.Values{"csrf": {s.token("/workflows/" + id)}}); code >= 400 {
		t.Fatalf("cancel: %d", code)
	}
	for _, jid := range res.Tasks {
		if j, err := f.be.JobGet(ctx, jid); err != nil || j.State != backend.StateCancelled {
			t.Errorf("task %d after cancel: %v %v", jid, j, err)
		}
	}
	if code, _, _ := s.get("/workflows/999999"); code != 404 {
		t.Errorf("GET of no workflow: %d, want 404", code)
	}
}
