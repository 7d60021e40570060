package dashtest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/ui"
)

// xssKind is a job kind that would run a script if a page did not escape it.
const xssKind = "<script>alert(1)</script>"

// chromiumPath finds Debian's chromium (.ci/test installs it); a machine
// without it fails the test rather than skipping it.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("SPOOL_TEST_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install Debian's chromium (.ci/test does) or set SPOOL_TEST_CHROMIUM")
	return ""
}

// artifactDir is where screenshots go: $SPOOL_TEST_ARTIFACTS, else
// ui/dashtest/artifacts in the working tree (ignored by git).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("SPOOL_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	t.Logf("screenshots in %s", abs)
	return abs
}

// browser is a headless Chromium; dialogs (the actions' confirmations)
// are accepted and recorded, and so are script exceptions, console errors
// and the browser's own error log (where CSP violations go).
type browser struct {
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string // "type: message"
	errors  []string
}

func newBrowser(t *testing.T) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
		// A name an attacker would point at this machine (DNS
		// rebinding), resolved to loopback inside this browser only.
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(b.event))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the browser's log: %v", err)
	}
	return b
}

// event records what the page does; it runs on the tab's reader, so the
// dialog is answered from a goroutine of its own.
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
		go func() {
			_, _ = chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}()
	case *runtime.EventExceptionThrown:
		b.errors = append(b.errors, fmt.Sprintf("exception: %s %+v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception))
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, fmt.Sprintf("%s", a.Value))
			}
			b.errors = append(b.errors, "console: "+strings.Join(parts, " "))
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError && !strings.Contains(e.Entry.URL, "favicon") {
			b.errors = append(b.errors, fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	}
}

// do runs steps within a minute.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value, within a minute.
func get[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	png := get(t, b, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) seen() (dialogs, errs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...), append([]string(nil), b.errors...)
}

// TestBrowser drives the dashboard in headless Chromium: every page loads
// (with a screenshot each), the chart draws, retry and cancel change a
// job's state after their confirmation, an action without the CSRF token
// gets 403 and changes nothing, a kind made of a script tag shows as text
// and runs nothing, and a page refreshes itself when the store changes.
func TestBrowser(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	discarded := f.discardedJob(t)
	running := f.runningJob(t)
	xss := f.insert(t, xssKind, "", nil)
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	dir := artifactDir(t)
	b := newBrowser(t)

	// Every page, with a screenshot.
	b.do(t, "queues page", chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.chart[data-ready="true"] canvas`)))
	b.screenshot(t, dir, "queues")
	b.do(t, "jobs page", chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-job="%d"]`, xss))))
	b.screenshot(t, dir, "jobs")
	b.do(t, "job page", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, discarded)), chromedp.WaitVisible(chromedp.CSS(`#job-state`)))
	b.screenshot(t, dir, "job")
	jobText := get(t, b, "job page text", chromedp.Text(chromedp.CSS(`main`)))
	for _, want := range []string{"smtp: 550 <no such user>", "secret-note", "attempt 1 failed", "discarded"} {
		if !strings.Contains(jobText, want) {
			t.Errorf("job page lacks %q:\n%s", want, jobText)
		}
	}
	// A periodic job a leader recorded, which this client does not define.
	if _, err := f.be.PeriodicRecord(ctx, &backend.PeriodicRecordParams{Jobs: []backend.PeriodicJob{{
		Name: "hourly-sync", Schedule: "every 1h0m0s", Queue: "sync", Since: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "periodic page", chromedp.Navigate(srv.URL+"/periodic"), chromedp.WaitVisible(chromedp.CSS(`table.periodic`)))
	b.screenshot(t, dir, "periodic")
	if txt := get(t, b, "periodic text", chromedp.Text(chromedp.CSS(`table.periodic`))); !strings.Contains(txt, "nightly-report") || !strings.Contains(txt, "every 1h0m0s") ||
		!strings.Contains(txt, "hourly-sync") || !strings.Contains(txt, "not defined by this process") {
		t.Errorf("periodic page lacks the defined or the recorded periodic job:\n%s", txt)
	}
	b.do(t, "limits page", chromedp.Navigate(srv.URL+"/limits"), chromedp.WaitVisible(chromedp.CSS(`section.limits[data-queue="flowq"]`)))
	b.screenshot(t, dir, "limits")
	if txt := get(t, b, "limits text", chromedp.Text(chromedp.CSS(`section.limits[data-queue="flowq"]`))); !strings.Contains(txt, "global limit 5") || !strings.Contains(txt, "tenant-a") {
		t.Errorf("limits page lacks the queue's rule or its key:\n%s", txt)
	}

	// The script-tag kind is text on the list and on its page; no alert.
	b.do(t, "xss on list", chromedp.Navigate(srv.URL+"/jobs"))
	if got := get(t, b, "kind cell", chromedp.Text(chromedp.CSS(fmt.Sprintf(`tr[data-job="%d"] td.kind`, xss)))); got != xssKind {
		t.Errorf("kind cell shows %q, want the kind as text %q", got, xssKind)
	}
	b.do(t, "xss on job page", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, xss)))
	if got := get(t, b, "kind field", chromedp.Text(chromedp.CSS(`dd.kind`))); got != xssKind {
		t.Errorf("job page shows kind %q, want %q", got, xssKind)
	}

	// Retry the discarded job: confirm, then the page shows it available.
	b.do(t, "retry", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, discarded)),
		chromedp.Click(chromedp.CSS(`button[data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-state.available`)))
	if j, err := f.client.JobGet(ctx, discarded); err != nil || j.State != spool.JobStateAvailable {
		t.Fatalf("after retry in the browser: %+v %v", j, err)
	}
	// Cancel the running job.
	b.do(t, "cancel", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, running)),
		chromedp.Click(chromedp.CSS(`button[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-state.cancelled`)))
	if j, err := f.client.JobGet(ctx, running); err != nil || j.State != spool.JobStateCancelled {
		t.Fatalf("after cancel in the browser: %+v %v", j, err)
	}
	dialogs, _ := b.seen()
	var confirms int
	for _, d := range dialogs {
		if strings.HasPrefix(d, "confirm: ") {
			confirms++
		} else {
			t.Errorf("unexpected dialog %q", d)
		}
	}
	if confirms != 2 {
		t.Errorf("%d confirmations, want 2 (retry, cancel): %v", confirms, dialogs)
	}

	// An action from the page's own origin without the token, or with a
	// wrong one: 403, and the job stays as it was.
	target := f.insert(t, "note", "", nil)
	b.do(t, "jobs page", chromedp.Navigate(srv.URL+"/jobs"))
	status := get(t, b, "post without token", chromedp.Evaluate[int](
		fmt.Sprintf(`fetch("/jobs/%d/cancel", {method: "POST"}).then(r => r.status)`, target), chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Errorf("POST without a CSRF token: status %d, want 403", status)
	}
	status = get(t, b, "post with a wrong token", chromedp.Evaluate[int](fmt.Sprintf(
		`fetch("/jobs/%d/cancel", {method: "POST", headers: {"X-CSRF-Token": "x".repeat(43)}}).then(r => r.status)`, target), chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Errorf("POST with a wrong CSRF token: status %d, want 403", status)
	}
	if j, err := f.client.JobGet(ctx, target); err != nil || j.State != spool.JobStateAvailable {
		t.Fatalf("job after refused actions: %+v %v", j, err)
	}

	// Live refresh: a job inserted elsewhere shows up without a reload
	// (the marker set on the window survives).
	b.do(t, "open queues", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"]`)))
	get(t, b, "set marker", chromedp.Evaluate[bool](`window.spoolMarker = true`))
	f.insert(t, "note", "fresh", nil)
	b.do(t, "live refresh", chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="fresh"]`)))
	if !get(t, b, "read marker", chromedp.Evaluate[bool](`window.spoolMarker === true`)) {
		t.Error("the page reloaded instead of refreshing in place")
	}

	dialogs, errs := b.seen()
	for _, d := range dialogs {
		if strings.HasPrefix(d, "alert: ") {
			t.Errorf("a script ran: dialog %q", d)
		}
	}
	refused := fmt.Sprintf("403 (Forbidden) %s/jobs/%d/cancel", srv.URL, target)
	for _, e := range errs {
		if strings.HasPrefix(e, "log (network): ") && strings.HasSuffix(e, refused) {
			continue // the two refused posts above
		}
		t.Errorf("browser error (a CSP violation or a script error): %s", e)
	}
}

// navStatus is the HTTP status of the page the browser shows.
func navStatus(t *testing.T, b *browser) int {
	t.Helper()
	return get(t, b, "navigation status", chromedp.Evaluate[int](`performance.getEntriesByType("navigation")[0].responseStatus`))
}

// TestBrowserSecurity drives the dashboard's defences against hostile
// input in headless Chromium: a page reached through a name that resolves
// to 127.0.0.1 (DNS rebinding) gets 421 and cannot post an action; a bad
// filter is a 400 page that states the rule and does not refresh; a form
// posted from a page whose URL path reads as another site
// ("//evil.example/x") comes back to the dashboard; a 250-character kind
// and a 4 kB error do not widen a page past the window; args show
// "<script>" as written; a page whose job is deleted stops refreshing.
func TestBrowserSecurity(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	port := mustURL(t, srv.URL).Port()
	dir := artifactDir(t)
	b := newBrowser(t)
	var expected []string // network errors the steps cause on purpose

	// DNS rebinding: evil.example resolves to 127.0.0.1, so its page is
	// same-origin with whatever listens there.
	victim := f.insert(t, "note", "", nil)
	evil := "http://evil.example:" + port
	b.do(t, "rebinding page", chromedp.Navigate(evil+"/jobs"))
	if st := navStatus(t, b); st != 421 {
		t.Errorf("the dashboard through evil.example: status %d, want 421", st)
	}
	if txt := get(t, b, "refusal text", chromedp.Text(chromedp.CSS(`body`))); !strings.Contains(txt, "does not answer to host") || !strings.Contains(txt, "--allowed-host") || strings.Contains(txt, "secret-note") {
		t.Errorf("the refusal through evil.example:\n%s", txt)
	}
	// Its script posts an action with the token of the page it got, if
	// it got one (a dashboard page carries it in hx-headers).
	status := get(t, b, "rebinding post", chromedp.Evaluate[int](fmt.Sprintf(`(() => {
		let tok = "";
		try { tok = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"]; } catch (e) {}
		return fetch("/jobs/%d/cancel", {method: "POST", headers: {"X-CSRF-Token": tok}}).then(r => r.status);
	})()`, victim), chromedp.EvalAwaitPromise))
	if status != 421 {
		t.Errorf("POST from the rebinding page: status %d, want 421", status)
	}
	expected = append(expected, "421 (Misdirected Request) "+evil+"/jobs", fmt.Sprintf("421 (Misdirected Request) %s/jobs/%d/cancel", evil, victim))
	if j, err := f.client.JobGet(ctx, victim); err != nil || j.State != spool.JobStateAvailable {
		t.Fatalf("job after the rebinding post: %+v %v", j, err)
	}

	// A bad filter: 400, the rule on the page, no live refresh.
	b.do(t, "bad kind filter", chromedp.Navigate(srv.URL+"/jobs?kind=%ff"), chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	if st := navStatus(t, b); st != 400 {
		t.Errorf("/jobs?kind=%%ff: status %d, want 400", st)
	}
	if txt := get(t, b, "filter error", chromedp.Text(chromedp.CSS(`p.error`))); !strings.Contains(txt, "printable characters of valid UTF-8") {
		t.Errorf("the bad filter's message: %q", txt)
	}
	if get(t, b, "refresh attribute", chromedp.Evaluate[bool](`document.getElementById("live").hasAttribute("hx-trigger")`)) {
		t.Error("the error page refreshes itself")
	}
	expected = append(expected, "400 (Bad Request) "+srv.URL+"/jobs?kind=%ff")

	// A plain form post (no htmx) from a page whose path reads as another
	// site: the browser sends it as Referer, the answer must not follow it.
	b.do(t, "queues page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"] button[data-action="pause"]`)))
	get(t, b, "pushState", chromedp.Evaluate[bool](`history.pushState(null, "", location.origin + "//evil.example/x"), true`))
	get(t, b, "submit", chromedp.Evaluate[bool](`document.querySelector('tr[data-queue="default"] form.action').submit(), true`))
	b.do(t, "back on the dashboard", chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="default"] button[data-action="resume"]`)))
	if loc := get(t, b, "location", chromedp.Evaluate[string](`location.href`)); loc != srv.URL+"/" {
		t.Errorf("after the post from //evil.example/x the browser is at %q, want %q", loc, srv.URL+"/")
	}
	// TokenAuth's redirect, which takes the token out of the address, from
	// a path that reads as another site.
	const token = "0123456789abcdef0123"
	ft := newFixture(t, &ui.Options{Authorize: ui.TokenAuth(token)})
	srvT := httptest.NewServer(ft.handler)
	t.Cleanup(srvT.Close)
	b.do(t, "token URL", chromedp.Navigate(srvT.URL+"//evil.example/x?token="+token))
	if loc := get(t, b, "location", chromedp.Evaluate[string](`location.href`)); loc != srvT.URL+"/" {
		t.Errorf("TokenAuth from //evil.example/x sent the browser to %q, want %q", loc, srvT.URL+"/")
	}

	// Long values: the table stays within the window, the row's last
	// cells on screen; a 4 kB error wraps on the job's page.
	longKind := strings.Repeat("k", 250)
	long := f.insert(t, longKind, "", nil)
	b.do(t, "jobs with a long kind", chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-job="%d"]`, long))))
	b.screenshot(t, dir, "jobs-long-kind")
	widths := get(t, b, "widths", chromedp.Evaluate[[]float64](fmt.Sprintf(`[window.innerWidth, document.querySelector("table.jobs").getBoundingClientRect().width,
		document.documentElement.scrollWidth, document.querySelector('tr[data-job="%d"] td:last-child').getBoundingClientRect().right]`, long)))
	t.Logf("jobs page with a 250-character kind: window %.0f px, table %.0f px, document %.0f px, last cell's right edge %.0f px", widths[0], widths[1], widths[2], widths[3])
	if widths[1] > widths[0] || widths[2] > widths[0] || widths[3] > widths[0] {
		t.Errorf("a 250-character kind widens the jobs page past the window: %v", widths)
	}
	if title := get(t, b, "kind title", chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('tr[data-job="%d"] td.kind .cut')?.title ?? ""`, long))); title != longKind {
		t.Errorf("the cut kind's title is %q, want the whole kind", title)
	}
	failed := f.failedJob(t, strings.Repeat("E", 4096))
	b.do(t, "job with a long error", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, failed)), chromedp.WaitVisible(chromedp.CSS(`#job-state`)))
	b.screenshot(t, dir, "job-long-error")
	widths = get(t, b, "job widths", chromedp.Evaluate[[]float64](`[window.innerWidth, document.documentElement.scrollWidth]`))
	t.Logf("job page with a 4 kB error: window %.0f px, document %.0f px", widths[0], widths[1])
	if widths[1] > widths[0] {
		t.Errorf("a 4 kB error widens the job page past the window: %v", widths)
	}

	// Args as written.
	res, err := f.client.Insert(ctx, rawArgs{kind: "markup", Data: "<script>alert(1)</script> & co"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.do(t, "job with markup args", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, res.ID)), chromedp.WaitVisible(chromedp.CSS(`#args`)))
	if args := get(t, b, "args text", chromedp.Text(chromedp.CSS(`#args`))); !strings.Contains(args, `"data": "<script>alert(1)</script> & co"`) {
		t.Errorf("args shown as %q, want the text as written", args)
	}

	// The job is deleted while its page is open: the refresh stops.
	gone := f.insert(t, "note", "", nil)
	b.do(t, "job page", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, gone)), chromedp.WaitVisible(chromedp.CSS(`#job-state`)))
	if _, err := f.client.JobDelete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	b.do(t, "refresh stops", chromedp.WaitVisible(chromedp.CSS(`#live-stopped`)))
	if get(t, b, "still polling", chromedp.Evaluate[bool](`document.getElementById("live").hasAttribute("hx-trigger")`)) {
		t.Error("the page still refreshes after an error")
	}
	expected = append(expected, fmt.Sprintf("404 (Not Found) %s/jobs/%d", srv.URL, gone))
	htmxError := fmt.Sprintf(`console: "Response Status Error Code 404 from /jobs/%d,`, gone) // htmx logs the failed refresh

	dialogs, errs := b.seen()
	for _, d := range dialogs {
		t.Errorf("unexpected dialog %q", d)
	}
	for _, e := range errs {
		ok := strings.HasPrefix(e, htmxError)
		for _, x := range expected {
			ok = ok || strings.HasPrefix(e, "log (network): ") && strings.HasSuffix(e, x)
		}
		if !ok {
			t.Errorf("browser error (a CSP violation or a script error): %s", e)
		}
	}
}

// TestBrowserWorkflow drives a workflow's and a batch's pages in headless
// Chromium: the graph draws a box per task (each with its state and a size
// on screen) and an arrow per dependency, the cancel button cancels every
// task after its confirmation and the boxes show it, the retry button runs
// them again; a workflow over the bound is drawn collapsed; the batch page
// shows its progress. No CSP violation or script error on the way.
func TestBrowserWorkflow(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	w := spool.NewWorkflow("nightly")
	w.Add("extract", rawArgs{kind: "extract"}, nil)
	w.Add("by-region", rawArgs{kind: "region"}, nil, spool.After("extract"))
	w.Add("by-product", rawArgs{kind: "product"}, nil, spool.After("extract"))
	w.Add("publish", rawArgs{kind: "publish"}, nil, spool.After("by-region"), spool.AfterAny("by-product"))
	res, err := f.client.InsertWorkflow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	dir := artifactDir(t)
	b := newBrowser(t)
	page := fmt.Sprintf("%s/workflows/%d", srv.URL, res.ID)

	b.do(t, "workflow page", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`svg#graph a.node[data-task="publish"] rect`)))
	b.screenshot(t, dir, "workflow")
	boxes := get(t, b, "boxes", chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg#graph a.node")].map(n => n.getAttribute("data-task") + ":" + n.getAttribute("data-state")).sort()`))
	if want := []string{"by-product:waiting", "by-region:waiting", "extract:available", "publish:waiting"}; fmt.Sprint(boxes) != fmt.Sprint(want) {
		t.Errorf("graph boxes %v, want %v", boxes, want)
	}
	if n := get(t, b, "arrows", chromedp.Evaluate[int](`document.querySelectorAll("svg#graph path.edge").length`)); n != 4 {
		t.Errorf("%d arrows, want 4", n)
	}
	// Drawn, not just present: every box has a size, each level below the
	// one before.
	sizes := get(t, b, "box sizes", chromedp.Evaluate[[]float64](`["extract", "by-region", "publish"].map(t => document.querySelector('svg#graph a.node[data-task="' + t + '"] rect').getBoundingClientRect()).flatMap(r => [r.width, r.top])`))
	if sizes[0] <= 0 || sizes[2] <= 0 || sizes[4] <= 0 || !(sizes[1] < sizes[3] && sizes[3] < sizes[5]) {
		t.Errorf("boxes not drawn by level (width, top of extract, by-region, publish): %v", sizes)
	}
	fill := get(t, b, "fill", chromedp.Evaluate[string](`getComputedStyle(document.querySelector('svg#graph a.node[data-task="extract"] rect')).fill`))
	waitingFill := get(t, b, "fill", chromedp.Evaluate[string](`getComputedStyle(document.querySelector('svg#graph a.node[data-task="publish"] rect')).fill`))
	if fill == waitingFill {
		t.Errorf("an available and a waiting task have one colour (%s)", fill)
	}

	b.do(t, "cancel workflow", chromedp.Click(chromedp.CSS(`button[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph a.node[data-task="publish"][data-state="cancelled"]`)))
	b.screenshot(t, dir, "workflow-cancelled")
	for name, id := range res.Tasks {
		if j, err := f.client.JobGet(ctx, id); err != nil || j.State != spool.JobStateCancelled {
			t.Errorf("task %s after cancel in the browser: %+v %v", name, j, err)
		}
	}
	if n := get(t, b, "cancelled boxes", chromedp.Evaluate[int](`document.querySelectorAll('svg#graph a.node[data-state="cancelled"]').length`)); n != 4 {
		t.Errorf("%d boxes show cancelled, want 4", n)
	}
	b.do(t, "retry workflow", chromedp.Click(chromedp.CSS(`button[data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#graph a.node[data-task="extract"][data-state="available"]`)))
	if j, err := f.client.JobGet(ctx, res.Tasks["publish"]); err != nil || j.State != spool.JobStateWaiting {
		t.Errorf("publish after retry in the browser: %+v %v", j, err)
	}
	// A box opens its task's job.
	b.do(t, "open a task", chromedp.Click(chromedp.CSS(`svg#graph a.node[data-task="extract"] rect`)), chromedp.WaitVisible(chromedp.CSS(`#job-workflow`)))

	// Over the bound: collapsed, and says so.
	big := spool.NewWorkflow("wide")
	big.Add("root", rawArgs{kind: "split"}, nil)
	for i := range ui.GraphMaxTasks {
		big.Add(fmt.Sprintf("part-%d", i), rawArgs{kind: "part"}, nil, spool.After("root"))
	}
	bigRes, err := f.client.InsertWorkflow(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	b.do(t, "collapsed workflow", chromedp.Navigate(fmt.Sprintf("%s/workflows/%d", srv.URL, bigRes.ID)), chromedp.WaitVisible(chromedp.CSS(`#graph-collapsed`)))
	b.screenshot(t, dir, "workflow-collapsed")
	groups := get(t, b, "groups", chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg#graph g.node.group")].map(n => n.getAttribute("data-kind") + ":" + n.getAttribute("data-total"))`))
	if want := []string{"split:1", fmt.Sprintf("part:%d", ui.GraphMaxTasks)}; fmt.Sprint(groups) != fmt.Sprint(want) {
		t.Errorf("collapsed groups %v, want %v", groups, want)
	}

	// A batch's page.
	bt, err := f.client.InsertBatch(ctx, spool.BatchOpts{Name: "import", OnComplete: &spool.BatchCallback{Args: rawArgs{kind: "cleanup"}}},
		[]spool.InsertManyParams{{Args: rawArgs{kind: "row"}}, {Args: rawArgs{kind: "row"}}})
	if err != nil {
		t.Fatal(err)
	}
	b.do(t, "batch page", chromedp.Navigate(fmt.Sprintf("%s/batches/%d", srv.URL, bt.ID)), chromedp.WaitVisible(chromedp.CSS(`#batch-progress`)))
	b.screenshot(t, dir, "batch")
	if txt := get(t, b, "batch text", chromedp.Text(chromedp.CSS(`main`))); !strings.Contains(txt, "0/2 final") || !strings.Contains(txt, "on completion") {
		t.Errorf("batch page:\n%s", txt)
	}

	dialogs, errs := b.seen()
	if len(dialogs) != 2 {
		t.Errorf("dialogs %v, want the two confirmations (cancel, retry)", dialogs)
	}
	for _, e := range errs {
		t.Errorf("browser error (a CSP violation or a script error): %s", e)
	}
}
