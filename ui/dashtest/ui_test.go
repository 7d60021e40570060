package dashtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
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

// do sends req through the session's client (its cookies, no redirects
// followed) and returns the status, headers and body.
func (s *session) do(req *http.Request) (int, http.Header, string) {
	s.t.Helper()
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestRebindingHostRefused: without auth, a request whose Host is a name
// an attacker can point at 127.0.0.1 (DNS rebinding: the attacker's page
// is then same-origin with the dashboard) gets 421 saying which hosts are
// served, sets no cookie, shows no job and changes nothing, even with a
// matching Origin and the browser's own CSRF cookie and token. Loopback
// names and addresses are served; AllowedHosts admits more.
func TestRebindingHostRefused(t *testing.T) {
	f := newFixture(t, nil)
	srv := serve(t, f)
	s := newSession(t, srv)
	id := f.insert(t, "note", "", nil)
	page := fmt.Sprintf("/jobs/%d", id)
	tok := s.token(page)
	port := mustURL(t, srv.URL).Port()
	evil := "evil.example:" + port

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/jobs", nil)
	req.Host = evil
	code, h, body := s.do(req)
	if code != http.StatusMisdirectedRequest {
		t.Errorf("GET /jobs with Host %s: status %d, want 421", evil, code)
	}
	for _, want := range []string{`"` + evil + `"`, "localhost", "127.0.0.1", "--allowed-host", "AllowedHosts"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "secret-note") || h.Get("Set-Cookie") != "" {
		t.Errorf("the refusal shows a job or sets a cookie: %v\n%s", h, body)
	}
	if h.Get("Content-Security-Policy") == "" {
		t.Error("the refusal has no CSP")
	}

	// The attacker's page does what a page of the dashboard's own origin
	// may: fetch the job's page (the browser keeps the CSRF cookie it
	// sets, for evil.example), read the token from it, post with both.
	req, _ = http.NewRequest(http.MethodGet, srv.URL+page, nil)
	req.Host = evil
	_, _, evilPage := s.do(req)
	evilTok := tok
	if m := csrfField.FindStringSubmatch(evilPage); m != nil {
		evilTok = m[1]
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+page+"/cancel", strings.NewReader(url.Values{"csrf": {evilTok}}.Encode()))
	req.Host = evil
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+evil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if code, _, body := s.do(req); code != http.StatusMisdirectedRequest {
		t.Errorf("POST cancel with Host %s: status %d, want 421: %s", evil, code, body)
	}
	if j, err := f.client.JobGet(context.Background(), id); err != nil || j.State != spool.JobStateAvailable {
		t.Fatalf("job after the rebinding post: %+v %v", j, err)
	}

	for host, want := range map[string]int{
		"localhost:" + port: 200, "LocalHost.:" + port: 200, "127.0.0.1:" + port: 200, "[::1]:" + port: 200,
		"127.0.0.2:" + port: 200, "localhost": 200,
		"evil.example": 421, "localhost.evil.example:" + port: 421, "127.0.0.1.evil.example:" + port: 421,
		"10.1.2.3:" + port: 421, "dash.internal:" + port: 421,
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/jobs", nil)
		req.Host = host
		if code, _, _ := s.do(req); code != want {
			t.Errorf("Host %q: status %d, want %d", host, code, want)
		}
	}
	// A request without a Host (HTTP/1.0) names nothing the dashboard serves.
	r := httptest.NewRequest(http.MethodGet, "/jobs", nil)
	r.Host = ""
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, r)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("no Host: status %d, want 421", rec.Code)
	}

	// Configured names, and a domain with its subdomains.
	fa := newFixture(t, &ui.Options{AllowedHosts: []string{"Dash.Internal", ".corp.example"}})
	sa := newSession(t, serve(t, fa))
	for host, want := range map[string]int{
		"dash.internal:" + port: 200, "corp.example": 200, "jobs.corp.example:" + port: 200, "localhost": 200,
		"evilcorp.example": 421, "evil.example:" + port: 421, "dash.internal.evil.example": 421,
	} {
		req, _ := http.NewRequest(http.MethodGet, sa.base+"/", nil)
		req.Host = host
		if code, _, _ := sa.do(req); code != want {
			t.Errorf("AllowedHosts, Host %q: status %d, want %d", host, code, want)
		}
	}
	for _, bad := range []string{"dash.internal:8080", "http://dash.internal", "", "a b"} {
		if _, err := ui.New(f.client, &ui.Options{AllowedHosts: []string{bad}}); err == nil {
			t.Errorf("AllowedHosts %q accepted", bad)
		}
	}
}

// TestHostWithAuthorize: with Authorize set, any host is admitted unless
// AllowedHosts names some (a rebinding page never gets the credentials a
// browser keeps for the dashboard's own site); with AllowedHosts, the
// check holds before authorization. Guard puts a handler of the
// application's behind the same checks and headers.
func TestHostWithAuthorize(t *testing.T) {
	const token = "0123456789abcdef0123"
	get := func(h http.Handler, host, path string, bearer bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = host
		if bearer {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	open := newFixture(t, &ui.Options{Authorize: ui.TokenAuth(token)})
	if c := get(open.handler, "dash.example.com", "/", true).Code; c != 200 {
		t.Errorf("Authorize, no AllowedHosts, a token: status %d, want 200", c)
	}
	if c := get(open.handler, "dash.example.com", "/", false).Code; c != 401 {
		t.Errorf("Authorize, no AllowedHosts, no token: status %d, want 401", c)
	}
	strict := newFixture(t, &ui.Options{Authorize: ui.TokenAuth(token), AllowedHosts: []string{"dash.example.com"}})
	if c := get(strict.handler, "dash.example.com", "/", true).Code; c != 200 {
		t.Errorf("AllowedHosts, allowed host: status %d, want 200", c)
	}
	if c := get(strict.handler, "evil.example", "/", true).Code; c != 421 {
		t.Errorf("AllowedHosts, another host with the token: status %d, want 421", c)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "jobs 1\n") })
	guarded := strict.handler.Guard(metrics)
	if rec := get(guarded, "evil.example", "/metrics", true); rec.Code != 421 {
		t.Errorf("guarded, another host: status %d, want 421", rec.Code)
	}
	if rec := get(guarded, "dash.example.com", "/metrics", false); rec.Code != 401 {
		t.Errorf("guarded, no token: status %d, want 401", rec.Code)
	}
	rec := get(guarded, "dash.example.com", "/metrics", true)
	if rec.Code != 200 || rec.Body.String() != "jobs 1\n" {
		t.Errorf("guarded, with the token: %d %q", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("guarded handler's headers: %v", rec.Header())
	}
}

// TestBadInputAnswers4xx: every filter is checked as an insert checks names
// (400 with the rule), on every backend: a kind of invalid UTF-8 or with a
// NUL reached PostgreSQL, which answered 500 with its own error. Static
// paths that name no file are 404 (a directory listed its files, a name of
// invalid UTF-8 was 500), and no step logs an error.
func TestBadInputAnswers4xx(t *testing.T) {
	for _, name := range testBackends {
		t.Run(name, func(t *testing.T) {
			var logs conformance.LogBuffer
			f := newFixtureOn(t, name, &ui.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			s := newSession(t, serve(t, f))
			long := strings.Repeat("k", spool.MaxKindLength+1)
			for path, want := range map[string]int{
				"/jobs?kind=%00": 400, "/jobs?kind=%ff": 400, "/jobs?kind=a%C3%28": 400, "/jobs?kind=a%0Ab": 400,
				"/jobs?kind=" + long: 400, "/jobs?kind=%7F": 400,
				"/jobs?queue=%ff": 400, "/jobs?queue=%00": 400,
				"/jobs?since=0999-12-31T23:59": 400, "/jobs?until=0001-01-01T00:00": 400, "/jobs?since=1969-12-31T23:59": 400,
				"/jobs?since=a%00": 400, "/jobs?state=%ff": 400, "/jobs?before=%ff": 400, "/jobs?after=99999999999999999999": 400,
				"/limits?queue=%ff": 400, "/limits?queue=%00": 400,
				"/jobs?kind=ok&after=9223372036854775807": 200, "/jobs?before=9223372036854775807": 200,
				"/jobs?since=1970-01-01T00:00&until=9999-12-31T23:59": 200, "/jobs?kind=" + long[1:]: 200,
				"/jobs/%ff": 404, "/jobs/9223372036854775808": 404, "/jobs/-1": 404,
				"/static/%ff": 404, "/static/": 404, "/static/vendor/": 404, "/static/vendor": 404, "/static/nope.js": 404,
				"/static/..%2f..%2fgo.mod": 404, "/static/app.css": 200,
			} {
				code, _, body := s.get(path)
				if code != want {
					t.Errorf("%s: status %d, want %d\n%.300s", path, code, want, body)
				}
				if code == 400 && path[:5] == "/jobs" && !strings.Contains(body, "must be") && !strings.Contains(body, "is not") && !strings.Contains(body, "out of range") {
					t.Errorf("%s: the 400 page does not state the rule:\n%.600s", path, body)
				}
				if strings.Contains(body, "ERROR") || strings.Contains(body, "SQLSTATE") || strings.Contains(body, "Index of") || strings.Contains(body, `href="vendor/"`) {
					t.Errorf("%s: the page shows a database error or a listing:\n%.300s", path, body)
				}
			}
			// The last id there is: no window of ids past it to read, no
			// link to newer jobs (its edge overflowed to a negative id).
			if _, _, body := s.get("/jobs?kind=ok&after=9223372036854775807"); strings.Contains(body, "-922") || strings.Contains(body, `rel="prev"`) {
				t.Errorf("a list after the largest id reads or links past it:\n%s", body)
			}
			if l := logs.String(); l != "" {
				t.Errorf("bad input was logged as an error:\n%s", l)
			}
		})
	}
}

// TestInternalErrorHidesCause: an error of the store answers 500 with a
// reference to the log line that has the cause, not the cause itself.
func TestInternalErrorHidesCause(t *testing.T) {
	var logs conformance.LogBuffer
	f := newFixtureOn(t, "sqlite", &ui.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s := newSession(t, serve(t, f))
	if err := f.be.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, body := s.get("/jobs")
	ref := regexp.MustCompile(`\(ref ([0-9a-f]{12})\)`).FindStringSubmatch(body)
	if code != http.StatusInternalServerError || ref == nil || strings.Contains(body, "closed") || strings.Contains(body, "sql") {
		t.Fatalf("GET /jobs on a closed store: %d %q", code, body)
	}
	if l := logs.String(); !strings.Contains(l, "ref="+ref[1]) || !strings.Contains(l, "closed") {
		t.Errorf("the log lacks the reference %s or the cause:\n%s", ref[1], l)
	}
}

// TestLongValuesAndArgs: a long kind and queue are cut in the list with the
// whole value in a title; args are shown as written (html/template escapes
// them once: "&lt;script&gt;", never encoding/json's "\u003cscript\u003e");
// a page that answers an error does not refresh itself.
func TestLongValuesAndArgs(t *testing.T) {
	f := newFixture(t, nil)
	s := newSession(t, serve(t, f))
	kind := strings.Repeat("verylongkind", 20)
	f.insert(t, kind, "", nil)
	_, _, body := s.get("/jobs")
	if !strings.Contains(body, `<span class="cut" title="`+kind+`">`+kind+`</span>`) {
		t.Errorf("the long kind is not cut with its title in the list:\n%s", body)
	}
	res, err := f.client.Insert(context.Background(), rawArgs{kind: "markup", Data: `<script>alert(1)</script> & more`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, body = s.get(fmt.Sprintf("/jobs/%d", res.ID))
	args := regexp.MustCompile(`(?s)<pre class="json" id="args">(.*?)</pre>`).FindStringSubmatch(body)
	if args == nil || !strings.Contains(args[1], `&lt;script&gt;alert(1)&lt;/script&gt; &amp; more`) || strings.Contains(args[1], `u003c`) {
		t.Errorf("args not shown as written: %q", args)
	}
	code, _, body := s.get("/jobs?state=bogus")
	if code != http.StatusBadRequest || strings.Contains(body, "hx-trigger") {
		t.Errorf("an error page refreshes itself (status %d):\n%s", code, body)
	}
	if _, _, body := s.get("/jobs"); !strings.Contains(body, `hx-trigger="every 2000ms"`) {
		t.Errorf("the list does not refresh itself:\n%s", body)
	}
}

// TestRedirectStaysOnDashboard: after an action the browser goes back to
// the page it came from, but only to a path of the dashboard: a Referer
// path a browser reads as another site ("//evil.example/x", "/\evil…")
// sends it to the dashboard's root. TokenAuth's redirect that drops the
// token from the URL likewise.
func TestRedirectStaysOnDashboard(t *testing.T) {
	for _, prefix := range []string{"", "/admin"} {
		f := newFixture(t, &ui.Options{Prefix: prefix})
		srv := serve(t, f) // the handler alone: no ServeMux cleans the path
		s := newSession(t, srv)
		id := f.insert(t, "note", "", nil)
		tok := s.token(fmt.Sprintf("%s/jobs/%d", prefix, id))
		host := mustURL(t, srv.URL).Host
		for ref, want := range map[string]string{
			prefix + "//evil.example/x":           prefix + "/",
			prefix + `/\evil.example/x`:           prefix + "/",
			prefix + "/%5Cevil.example/x":         prefix + "/",
			prefix + "/%2e%2e//evil.example/x":    prefix + "/",
			"//evil.example" + prefix + "/jobs":   prefix + "/",
			prefix + "/jobs?state=available":      prefix + "/jobs?state=available",
			prefix + "/jobs/../jobs?queue=mail":   prefix + "/jobs?queue=mail",
			prefix + "/jobs/..//evil.example/x/":  prefix + "/",
			prefix + "/jobs/../jobs/":             prefix + "/jobs/",
			prefix + "/jobs?x=%0A//evil.example/": prefix + "/jobs?x=%0A//evil.example/",
		} {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s%s/queues/pause", srv.URL, prefix), strings.NewReader(url.Values{"csrf": {tok}, "queue": {"mail"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header["Referer"] = []string{"http://" + host + ref}
			code, h, _ := s.do(req)
			loc := h.Get("Location")
			if code != http.StatusSeeOther || loc != want {
				t.Errorf("prefix %q, Referer path %q: %d to %q, want 303 to %q", prefix, ref, code, loc, want)
			}
		}
	}

	const token = "0123456789abcdef0123"
	f := newFixture(t, &ui.Options{Authorize: ui.TokenAuth(token)})
	srv := serve(t, f)
	for path, want := range map[string]string{
		"//evil.example/x":      "/",
		`/\evil.example/x`:      "/",
		`/\/evil.example/x`:     "/",
		"/%5Cevil.example/x":    "/",
		"/jobs?state=failed":    "/jobs?state=failed",
		"/jobs/?state=failed":   "/jobs/?state=failed",
		"/%2e%2e//evil.example": "/",
	} {
		s := newSession(t, srv) // no token cookie yet
		u := srv.URL + path
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		req, _ := http.NewRequest(http.MethodGet, u+sep+"token="+token, nil)
		code, h, _ := s.do(req)
		if loc := h.Get("Location"); code != http.StatusSeeOther || loc != want {
			t.Errorf("TokenAuth at %q: %d to %q, want 303 to %q", path, code, loc, want)
		}
	}
}
