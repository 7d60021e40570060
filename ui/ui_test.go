package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ui"
)

// session is a browser-like HTTP client: it keeps cookies and reads the
// CSRF token from the pages.
type session struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newSession(t *testing.T, srv *httptest.Server) *session {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Transport: srv.Client().Transport, Jar: jar}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &session{t: t, base: srv.URL, c: c}
}

func (s *session) get(path string) (int, http.Header, string) {
	s.t.Helper()
	resp, err := s.c.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token loads path and returns the CSRF token its forms carry.
func (s *session) token(path string) string {
	s.t.Helper()
	code, _, body := s.get(path)
	m := csrfField.FindStringSubmatch(body)
	if code != 200 || m == nil {
		s.t.Fatalf("GET %s: %d, no CSRF field in:\n%s", path, code, body)
	}
	return m[1]
}

// post sends a form as a plain browser form would (same origin).
func (s *session) post(path string, form url.Values) (int, http.Header) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func serve(t *testing.T, f *fixture) *httptest.Server {
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	return srv
}

// TestSecurityHeaders: every page, the API and the static files carry the
// CSP that forbids framing and foreign scripts.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, nil)
	id := f.insert(t, "note", "", nil)
	s := newSession(t, serve(t, f))
	for _, p := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", id), "/periodic", "/limits", "/api/throughput", "/static/app.js", "/nope"} {
		_, h, _ := s.get(p)
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"frame-ancestors 'none'", "script-src 'self'", "default-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, h)
		}
	}
}

// TestActionsNeedToken: a form post with the page's token works and
// redirects back; without it, with another browser's token, or from
// another site, it gets 403 and changes nothing.
func TestActionsNeedToken(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	srv := serve(t, f)
	s := newSession(t, srv)
	id := f.insert(t, "note", "", nil)
	page := fmt.Sprintf("/jobs/%d", id)
	tok := s.token(page)
	other := newSession(t, srv).token(page)
	if other == tok {
		t.Fatal("two browsers got the same CSRF token")
	}
	for _, tc := range []struct {
		name string
		form url.Values
	}{{"no token", url.Values{}}, {"another browser's token", url.Values{"csrf": {other}}}, {"a short token", url.Values{"csrf": {"abc"}}}} {
		if code, _ := s.post(page+"/cancel", tc.form); code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, code)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+page+"/cancel", strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := s.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post with a valid token: status %d, want 403", resp.StatusCode)
	}
	if j, err := f.client.JobGet(ctx, id); err != nil || j.State != spool.JobStateAvailable {
		t.Fatalf("job after refused posts: %+v %v", j, err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+page+"/cancel", strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Referer", "https://evil.example/phish")
	resp, err = s.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, h := resp.StatusCode, resp.Header
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("post with the token and a foreign referer: status %d to %q, want 303 to the dashboard", code, h.Get("Location"))
	}
	if j, err := f.client.JobGet(ctx, id); err != nil || j.State != spool.JobStateCancelled {
		t.Fatalf("job after cancel: %+v %v (redirect %s)", j, err, h.Get("Location"))
	}
	// An action that does not apply is a conflict, not a server error.
	if code, _ := s.post(page+"/cancel", url.Values{"csrf": {tok}}); code != http.StatusConflict {
		t.Errorf("cancel twice: status %d, want 409", code)
	}
	if code, _ := s.post("/queues/pause", url.Values{"csrf": {tok}, "queue": {"bad queue!"}}); code != http.StatusConflict {
		t.Errorf("pause a queue with a bad name: status %d, want 409", code)
	}
	if code, _ := s.post("/queues/pause", url.Values{"csrf": {tok}, "queue": {"mail"}}); code != http.StatusSeeOther {
		t.Errorf("pause: status %d", code)
	}
	paused, err := f.client.QueuesPaused(ctx)
	if err != nil || len(paused) != 1 || paused[0].Queue != "mail" {
		t.Fatalf("paused queues: %v %v", paused, err)
	}
	if code, _ := s.post(page+"/delete", url.Values{"csrf": {tok}}); code != http.StatusSeeOther {
		t.Errorf("delete: status %d", code)
	}
	if _, err := f.client.JobGet(ctx, id); err == nil {
		t.Error("job still there after delete")
	}
}

// TestReadOnly: no action is offered and every action is refused.
func TestReadOnly(t *testing.T) {
	f := newFixture(t, &ui.Options{ReadOnly: true})
	s := newSession(t, serve(t, f))
	id := f.discardedJob(t)
	page := fmt.Sprintf("/jobs/%d", id)
	_, _, body := s.get(page)
	if strings.Contains(body, `data-action=`) || !strings.Contains(body, "read-only") {
		t.Errorf("read-only page offers actions or does not say it is read-only:\n%s", body)
	}
	_, _, body = s.get("/")
	if strings.Contains(body, `data-action=`) {
		t.Error("read-only queues page offers pause")
	}
	// Even with a valid token (taken from the cookie a page set).
	var tok string
	for _, c := range s.c.Jar.Cookies(mustURL(t, s.base+"/")) {
		if c.Name == "spool_ui_csrf" {
			tok = c.Value
		}
	}
	if code, _ := s.post(page+"/retry", url.Values{"csrf": {tok}}); code != http.StatusForbidden {
		t.Errorf("retry in read-only mode: status %d, want 403", code)
	}
	if j, _ := f.client.JobGet(context.Background(), id); j.State != spool.JobStateDiscarded {
		t.Errorf("job changed in read-only mode: %s", j.State)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRedaction: redacted args never reach the page.
func TestRedaction(t *testing.T) {
	f := newFixture(t, &ui.Options{
		RedactKinds: []string{"card"},
		RedactArgs: func(kind string, args json.RawMessage) json.RawMessage {
			if kind == "partial" {
				return json.RawMessage(`{"data":"***"}`)
			}
			return args
		},
	})
	s := newSession(t, serve(t, f))
	for kind, want := range map[string]string{"card": "redacted", "partial": `&#34;***&#34;`, "note": "secret-note"} {
		id := f.insert(t, kind, "", nil)
		_, _, body := s.get(fmt.Sprintf("/jobs/%d", id))
		if !strings.Contains(body, want) {
			t.Errorf("kind %s: page lacks %q", kind, want)
		}
		if kind != "note" && strings.Contains(body, "secret-"+kind) {
			t.Errorf("kind %s: the args show on the page", kind)
		}
	}
}

// TestAuth: TokenAuth admits the printed URL once and then its cookie, or a
// bearer header; BasicAuth asks for credentials.
func TestAuth(t *testing.T) {
	const token = "0123456789abcdef0123"
	f := newFixture(t, &ui.Options{Authorize: ui.TokenAuth(token)})
	srv := serve(t, f)
	s := newSession(t, srv)
	if code, _, _ := s.get("/"); code != http.StatusUnauthorized {
		t.Errorf("no token: status %d, want 401", code)
	}
	if code, _, _ := s.get("/?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", code)
	}
	code, h, _ := s.get("/jobs?state=available&token=" + token)
	if code != http.StatusSeeOther || h.Get("Location") != "/jobs?state=available" {
		t.Errorf("token in the URL: status %d to %q, want 303 to the URL without it", code, h.Get("Location"))
	}
	if code, _, _ := s.get("/jobs"); code != http.StatusOK {
		t.Errorf("with the cookie: status %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/throughput", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("bearer token: status %d", resp.StatusCode)
	}

	fb := newFixture(t, &ui.Options{Authorize: ui.BasicAuth("ops", "correct horse")})
	srvB := serve(t, fb)
	resp, err = http.Get(srvB.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("basic auth, no credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for pass, want := range map[string]int{"wrong": http.StatusUnauthorized, "correct horse": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, srvB.URL+"/", nil)
		req.SetBasicAuth("ops", pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("basic auth with %q: status %d, want %d", pass, resp.StatusCode, want)
		}
	}
}

// TestPrefix: mounted under a prefix, every link and form uses it.
func TestPrefix(t *testing.T) {
	f := newFixture(t, &ui.Options{Prefix: "/admin/jobs/"})
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", f.handler)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "the app's own", http.StatusTeapot) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := newSession(t, srv)
	id := f.insert(t, "note", "", nil)
	code, _, body := s.get("/admin/jobs/")
	if code != 200 {
		t.Fatalf("queues under the prefix: %d", code)
	}
	for _, ref := range regexp.MustCompile(`\s(?:href|src|action|hx-post|hx-get|data-chart)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(ref[1], "/admin/jobs/") {
			t.Errorf("link %q is not under the prefix", ref[1])
		}
	}
	if code, _, _ := s.get(fmt.Sprintf("/admin/jobs/jobs/%d", id)); code != 200 {
		t.Errorf("job page under the prefix: %d", code)
	}
	if code, _, _ := s.get("/admin/jobs/static/vendor/htmx.min.js"); code != 200 {
		t.Errorf("static file under the prefix: %d", code)
	}
}

var jobRow = regexp.MustCompile(`<tr data-job="(\d+)">`)

// TestJobsPages: keyset pages of 50, newest first, forward and back, and
// filters that refuse bad input with 400.
func TestJobsPages(t *testing.T) {
	f := newFixture(t, nil)
	s := newSession(t, serve(t, f))
	var ids []int64
	for range 120 {
		ids = append(ids, f.insert(t, "pageme", "pages", nil))
	}
	ids = ids[len(ids)-120:]
	ids0 := func(body string) []string {
		var out []string
		for _, m := range jobRow.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	_, _, body := s.get("/jobs?queue=pages")
	first := ids0(body)
	if len(first) != 50 || first[0] != fmt.Sprint(ids[119]) || first[49] != fmt.Sprint(ids[70]) {
		t.Fatalf("first page: %v", first)
	}
	if strings.Contains(body, `rel="prev"`) {
		t.Error("first page offers newer jobs")
	}
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no link to older jobs")
	}
	t.Logf("older: %s", next[1])
	_, _, body = s.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	second := ids0(body)
	if len(second) != 50 || second[0] != fmt.Sprint(ids[69]) {
		t.Fatalf("second page: %v", second)
	}
	prev := regexp.MustCompile(`rel="prev" href="([^"]+)"`).FindStringSubmatch(body)
	if prev == nil {
		t.Fatal("second page has no link to newer jobs")
	}
	_, _, body = s.get(strings.ReplaceAll(prev[1], "&amp;", "&"))
	if back := ids0(body); len(back) != 50 || back[0] != first[0] || back[49] != first[49] {
		t.Fatalf("back to the first page: %v", back)
	}
	for _, bad := range []string{"/jobs?state=bogus", "/jobs?since=yesterday", "/jobs?before=-3", "/jobs?queue=no%20spaces"} {
		if code, _, _ := s.get(bad); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, code)
		}
	}
	if code, _, _ := s.get("/jobs/abc"); code != http.StatusNotFound {
		t.Errorf("/jobs/abc: status %d, want 404", code)
	}
	if code, _, _ := s.get("/jobs/999999"); code != http.StatusNotFound {
		t.Errorf("/jobs/999999: status %d, want 404", code)
	}
}
