package dashtest_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/ui"
)

// svgNodes finds the graph's task boxes: their task names and states.
var svgNodes = regexp.MustCompile(`<a href="[^"]*/jobs/\d+" class="node [a-z]+" data-task="([^"]+)" data-state="([a-z]+)"`)

// graphNodes returns a workflow page's drawn tasks, name → state.
func graphNodes(body string) map[string]string {
	out := map[string]string{}
	for _, m := range svgNodes.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestWorkflowPages, on every store: the workflows page lists a workflow
// with its tasks' states and a batch with its progress; a workflow's page
// draws its graph (a box per task with its state, an arrow per
// dependency, a task after those it waits for) and lists its tasks by
// level; a task's job page links to its workflow; the cancel button
// cancels every unfinished task, and the retry button runs them again in
// order (409 while the workflow runs).
func TestWorkflowPages(t *testing.T) {
	for _, name := range everyStore {
		t.Run(name, func(t *testing.T) {
			f := newFixtureOn(t, name, nil)
			ctx := context.Background()
			w := spool.NewWorkflow("nightly")
			w.Add("extract", reportArgs{}, nil)
			w.Add("load", reportArgs{}, nil, spool.After("extract"))
			w.Add("index", reportArgs{}, nil, spool.After("extract"))
			w.Add("publish", reportArgs{}, nil, spool.After("load"), spool.AfterAny("index"))
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
			for _, want := range []string{"nightly", "3 waiting, 1 available", "import", "0/2", "running"} {
				if !strings.Contains(body, want) {
					t.Errorf("workflows page lacks %q:\n%s", want, body)
				}
			}
			id := strconv.FormatInt(res.ID, 10)
			code, _, body = s.get("/workflows/" + id)
			if code != 200 {
				t.Fatalf("GET /workflows/%s: %d\n%s", id, code, body)
			}
			nodes := graphNodes(body)
			want := map[string]string{"extract": "available", "load": "waiting", "index": "waiting", "publish": "waiting"}
			if fmt.Sprint(nodes) != fmt.Sprint(want) {
				t.Errorf("graph's boxes: %v, want %v", nodes, want)
			}
			if n := strings.Count(body, `<path class="edge `); n != 4 {
				t.Errorf("%d arrows, want 4", n)
			}
			if n := strings.Count(body, `<path class="edge any"`); n != 1 {
				t.Errorf("%d dashed arrows (AfterAny), want 1", n)
			}
			if strings.Index(body, `data-task="extract"`) > strings.Index(body, `data-task="load"`) ||
				strings.Index(body, `data-task="load"`) > strings.Index(body, `data-task="publish"`) || !strings.Contains(body, "after load, index") {
				t.Errorf("tasks not by level:\n%s", body)
			}
			if strings.Contains(body, `id="graph-collapsed"`) {
				t.Error("a 4-task workflow is drawn collapsed")
			}
			_, _, jobBody := s.get(fmt.Sprintf("/jobs/%d", res.Tasks["load"]))
			if !strings.Contains(jobBody, `href="/workflows/`+id+`" id="job-workflow"`) {
				t.Errorf("a task's job page does not link to its workflow:\n%s", jobBody)
			}
			if code, _ := s.post("/workflows/"+id+"/cancel", url.Values{"csrf": {s.token("/workflows/" + id)}}); code >= 400 {
				t.Fatalf("cancel: %d", code)
			}
			for _, jid := range res.Tasks {
				if j, err := f.be.JobGet(ctx, jid); err != nil || j.State != backend.StateCancelled {
					t.Errorf("task %d after cancel: %v %v", jid, j, err)
				}
			}
			_, _, body = s.get("/workflows/" + id)
			for task, state := range graphNodes(body) {
				if state != "cancelled" {
					t.Errorf("after cancel the graph shows %s %s", task, state)
				}
			}
			if strings.Contains(body, `data-action="cancel"`) || !strings.Contains(body, `data-action="retry"`) {
				t.Error("a final workflow with cancelled tasks offers cancel, or not retry")
			}
			// Retry: each task again, after its retried dependencies.
			if code, _ := s.post("/workflows/"+id+"/retry", url.Values{"csrf": {s.token("/workflows/" + id)}}); code >= 400 {
				t.Fatalf("retry: %d", code)
			}
			_, _, body = s.get("/workflows/" + id)
			if nodes := graphNodes(body); fmt.Sprint(nodes) != fmt.Sprint(want) {
				t.Errorf("after retry the graph shows %v, want %v", nodes, want)
			}
			if code, _ := s.post("/workflows/"+id+"/retry", url.Values{"csrf": {s.token("/workflows/" + id)}}); code != 409 {
				t.Errorf("retry of a running workflow: %d, want 409", code)
			}
			if code, _ := s.post("/workflows/999999/retry", url.Values{"csrf": {s.token("/workflows/" + id)}}); code != 404 {
				t.Errorf("retry of no workflow: %d, want 404", code)
			}
			if code, _, _ := s.get("/workflows/999999"); code != 404 {
				t.Errorf("GET of no workflow: %d, want 404", code)
			}
		})
	}
}

// TestWorkflowGraphCollapsed, on every store: a workflow over the bound is
// drawn a box per level and kind, with the tasks' counts by state, says
// so, and lists its running and failed tasks with links.
func TestWorkflowGraphCollapsed(t *testing.T) {
	for _, name := range everyStore {
		t.Run(name, func(t *testing.T) {
			f := newFixtureOn(t, name, nil)
			ctx := context.Background()
			n := ui.GraphMaxTasks + 20
			w := spool.NewWorkflow("wide")
			w.Add("root", rawArgs{kind: "split"}, &spool.InsertOpts{Queue: "claims", MaxAttempts: 1})
			for i := range n - 2 {
				kind := "even"
				if i%2 == 1 {
					kind = "odd"
				}
				w.Add(fmt.Sprintf("part-%d", i), rawArgs{kind: kind}, nil, spool.After("root"))
			}
			deps := []spool.Dep{}
			for i := range n - 2 {
				deps = append(deps, spool.After(fmt.Sprintf("part-%d", i)))
			}
			w.Add("join", rawArgs{kind: "join"}, nil, deps...)
			res, err := f.client.InsertWorkflow(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			// The root fails: every part and the join are cancelled.
			row := f.claim(t, res.Tasks["root"])
			if r, err := f.be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{
				Lease: row.Lease(), Outcome: backend.OutcomeDiscard, Error: &backend.AttemptError{Attempt: 1, At: time.Now(), Error: "boom"}}}}); err != nil || len(r.Rejected) != 0 {
				t.Fatalf("discard root: %v %v", r, err)
			}
			s := newSession(t, serve(t, f))
			code, _, body := s.get(fmt.Sprintf("/workflows/%d", res.ID))
			if code != 200 {
				t.Fatalf("GET workflow: %d\n%s", code, body)
			}
			if !strings.Contains(body, `id="graph-collapsed"`) || !strings.Contains(body, fmt.Sprintf("This workflow has %d tasks", n)) {
				t.Errorf("the page does not say the graph is collapsed:\n%s", body)
			}
			if got := len(graphNodes(body)); got != 0 {
				t.Errorf("%d boxes of single tasks in a collapsed graph", got)
			}
			for _, want := range []string{
				`data-level="0" data-kind="split" data-total="1"`,
				fmt.Sprintf(`data-level="1" data-kind="even" data-total="%d"`, (n-1)/2),
				fmt.Sprintf(`data-level="1" data-kind="odd" data-total="%d"`, (n-2)/2),
				`data-level="2" data-kind="join" data-total="1"`,
				`data-state="discarded" data-count="1"`,
				fmt.Sprintf(`data-state="cancelled" data-count="%d"`, (n-1)/2),
				fmt.Sprintf(`href="/jobs/%d" class="state discarded" data-task="root"`, res.Tasks["root"]),
			} {
				if !strings.Contains(body, want) {
					t.Errorf("collapsed graph lacks %s", want)
				}
			}
			if got := strings.Count(body, `<g class="node group"`); got != 4 {
				t.Errorf("%d group boxes, want 4 (split, even, odd, join)", got)
			}
			if got := strings.Count(body, `<path class="edge `); got != 4 {
				t.Errorf("%d arrows between groups, want 4", got)
			}
		})
	}
}

// TestWorkflowGraphBig: a 10,000-task workflow (a chain of 5,000 and a
// fan-out of 5,000) is drawn collapsed, its 5,001 levels in bands, and
// its page stays small.
func TestWorkflowGraphBig(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	w := spool.NewWorkflow("big")
	w.Add("c-0", rawArgs{kind: "chain"}, nil)
	for i := 1; i < 5000; i++ {
		w.Add(fmt.Sprintf("c-%d", i), rawArgs{kind: "chain"}, nil, spool.After(fmt.Sprintf("c-%d", i-1)))
	}
	for i := range 5000 {
		w.Add(fmt.Sprintf("f-%d", i), rawArgs{kind: "fan"}, nil, spool.After("c-0"))
	}
	res, err := f.client.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, serve(t, f))
	start := time.Now()
	code, _, body := s.get(fmt.Sprintf("/workflows/%d", res.ID))
	if code != 200 {
		t.Fatalf("GET workflow: %d", code)
	}
	t.Logf("page of a 10,000-task workflow on %s: %d bytes in %s (a figure, not a test)", fixtureBackend(), len(body), time.Since(start))
	if !strings.Contains(body, "levels grouped by 50: 5000 levels") {
		t.Errorf("the page does not say how levels are grouped")
	}
	if groups := strings.Count(body, `<g class="node group"`); groups > 2*100 {
		t.Errorf("%d group boxes, more than two per band", groups)
	}
	if len(body) > 400_000 {
		t.Errorf("the page of a 10,000-task workflow is %d bytes", len(body))
	}
}

// TestBatchPages, on every store: the batch list and a batch's page show
// its progress, its callbacks and its members (paged); a member's job
// page links to its batch; retrying the batch's discarded members makes
// them available and leaves the others alone.
func TestBatchPages(t *testing.T) {
	for _, name := range everyStore {
		t.Run(name, func(t *testing.T) {
			f := newFixtureOn(t, name, nil)
			ctx := context.Background()
			members := make([]spool.InsertManyParams, 53)
			for i := range members {
				members[i] = spool.InsertManyParams{Args: rawArgs{kind: "member"}, InsertOpts: &spool.InsertOpts{Queue: "claims", MaxAttempts: 1}}
			}
			b, err := f.client.InsertBatch(ctx, spool.BatchOpts{Name: "import-2026",
				OnFailure: &spool.BatchCallback{Args: rawArgs{kind: "alert"}}, OnComplete: &spool.BatchCallback{Args: rawArgs{kind: "cleanup"}}}, members)
			if err != nil {
				t.Fatal(err)
			}
			// Two members end: one discarded, one completed.
			var discarded, completed int64
			for i, outcome := range []backend.Outcome{backend.OutcomeDiscard, backend.OutcomeComplete} {
				rows, err := f.be.JobClaim(ctx, &backend.JobClaimParams{Queue: "claims", Max: 1, Lease: time.Hour, ClaimID: "ui-test"})
				if err != nil || len(rows) != 1 {
					t.Fatalf("claim: %v %v", rows, err)
				}
				fin := backend.JobFinish{Lease: rows[0].Lease(), Outcome: outcome}
				if outcome == backend.OutcomeDiscard {
					fin.Error = &backend.AttemptError{Attempt: 1, At: time.Now(), Error: "bad row"}
					discarded = rows[0].ID
				} else {
					completed = rows[0].ID
				}
				if r, err := f.be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{fin}}); err != nil || len(r.Rejected) != 0 {
					t.Fatalf("finish %d: %v %v", i, r, err)
				}
			}
			s := newSession(t, serve(t, f))
			id := strconv.FormatInt(b.ID, 10)
			code, _, body := s.get("/batches")
			if code != 200 || !strings.Contains(body, `<tr data-batch="`+id+`"><td><a href="/batches/`+id+`">`) || !strings.Contains(body, "2/53") {
				t.Fatalf("GET /batches: %d\n%s", code, body)
			}
			code, _, body = s.get("/batches/" + id)
			if code != 200 {
				t.Fatalf("GET /batches/%s: %d\n%s", id, code, body)
			}
			for _, want := range []string{"import-2026", `id="batch-completed">1<`, `id="batch-discarded">1<`, `id="batch-unsettled">51<`,
				"2/53 final", "on failure", "on completion", `class="state waiting">waiting<`, "running (sealed)", `data-action="retry"`, `rel="next"`} {
				if !strings.Contains(body, want) {
					t.Errorf("batch page lacks %q", want)
				}
			}
			if n := strings.Count(body, `<tr data-job="`); n != 50 {
				t.Errorf("batch page lists %d members, want a page of 50", n)
			}
			last := b.Members[49].ID
			code, _, body = s.get(fmt.Sprintf("/batches/%s?after=%d", id, last))
			if n := strings.Count(body, `<tr data-job="`); code != 200 || n != 3 || !strings.Contains(body, "first members") {
				t.Errorf("the members' second page: %d, %d members", code, n)
			}
			_, _, jobBody := s.get(fmt.Sprintf("/jobs/%d", discarded))
			if !strings.Contains(jobBody, `href="/batches/`+id+`" id="job-batch"`) {
				t.Errorf("a member's job page does not link to its batch")
			}
			if code, _ := s.post("/batches/"+id+"/retry", url.Values{"csrf": {s.token("/batches/" + id)}}); code >= 400 {
				t.Fatalf("retry: %d", code)
			}
			if j, err := f.client.JobGet(ctx, discarded); err != nil || j.State != spool.JobStateAvailable || j.Attempt != 0 {
				t.Errorf("discarded member after retry: %+v %v", j, err)
			}
			if j, err := f.client.JobGet(ctx, completed); err != nil || j.State != spool.JobStateCompleted {
				t.Errorf("completed member after retry: %+v %v", j, err)
			}
			if code, _ := s.post("/batches/"+id+"/retry", url.Values{}); code != 403 {
				t.Errorf("retry without a CSRF token: %d, want 403", code)
			}
			for path, want := range map[string]int{"/batches/999999": 404, "/batches/x": 404, "/batches?before=x": 400, "/batches/" + id + "?after=-1": 400} {
				if code, _, _ := s.get(path); code != want {
					t.Errorf("GET %s: %d, want %d", path, code, want)
				}
			}
			if code, _ := s.post("/batches/999999/retry", url.Values{"csrf": {s.token("/batches/" + id)}}); code != 404 {
				t.Errorf("retry of no batch: %d, want 404", code)
			}
		})
	}
}
