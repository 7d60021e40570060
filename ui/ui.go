// Package ui is Spool's web dashboard: an http.Handler that shows queues,
// jobs, periodic jobs, workflows (drawn as graphs), batches and flow
// limits, retries, cancels and deletes jobs, cancels workflows, retries a
// batch's discarded members, and pauses and resumes queues. Mount it in an application's server under
// any prefix, or run it with `spool ui`.
//
// It is safe by default: every state-changing request needs a CSRF token
// bound to the browser (a request without one gets 403) and a same-origin
// fetch; every page is served with a Content-Security-Policy that allows
// only the dashboard's own scripts and styles and forbids framing;
// everything stored in a job is escaped by html/template; without
// Options.Authorize it answers only to loopback host names and
// Options.AllowedHosts (DNS rebinding). Access control is the
// application's: Options.Authorize (BasicAuth and TokenAuth are given).
//
// Pages are rendered on the server; htmx refreshes them in place and uPlot
// draws the throughput chart, both embedded (see assets/vendor.sh).
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

//go:generate sh assets/vendor.sh

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a dashboard. The zero value serves at "/", read-write,
// with no access control of its own.
type Options struct {
	// Prefix is the path the dashboard is mounted at ("/admin/jobs"); every
	// link and form of the pages starts with it. Requests must carry it:
	// mount the handler with mux.Handle(prefix+"/", handler).
	Prefix string
	// ReadOnly hides every action and refuses every state-changing request
	// with 403.
	ReadOnly bool
	// Authorize, when set, is asked about every request before anything
	// else; when it returns false it has written the response (401 with a
	// challenge, a redirect to a login page, 403…). BasicAuth and TokenAuth
	// make one.
	Authorize func(w http.ResponseWriter, r *http.Request) bool
	// RedactArgs, when set, rewrites a job's args before they are shown
	// (a job page and nowhere else shows them); returning nil shows
	// "redacted". RedactKinds is a shortcut for whole kinds.
	RedactArgs func(kind string, args json.RawMessage) json.RawMessage
	// RedactKinds lists kinds whose args are never shown.
	RedactKinds []string
	// Refresh is how often pages refresh in place (default 2 s; negative:
	// never).
	Refresh time.Duration
	// Logger receives errors of requests (default slog.Default()).
	Logger *slog.Logger
	// AllowedHosts are the host names (the Host header without its port)
	// the dashboard answers to, besides the loopback names (localhost,
	// 127.0.0.1, ::1 and every loopback address) and the address the
	// request arrived at, which it always answers to. A name starting with
	// a dot also admits its subdomains (".example.com": example.com and
	// a.example.com); "*" admits any host. Any other host gets 421
	// Misdirected Request: a page of another site whose name an attacker
	// points at this machine (DNS rebinding) is same-origin with the
	// dashboard in the browser, so without this check it could read the
	// pages and post actions.
	//
	// When AllowedHosts is empty and Authorize is set, any host is
	// admitted: credentials a browser keeps (a cookie, basic
	// authentication) are sent to the site they were given to, never to a
	// rebinding page. An Authorize that admits by network address (the
	// client's IP) is no such credential: give it AllowedHosts too.
	AllowedHosts []string
}

// How old the shared counts may be before a request refreshes them.
const (
	statsTTL      = 3 * time.Second
	throughputTTL = 10 * time.Second
	// firstWait is how long a page waits for a first count before it is
	// shown without it (it then arrives with a live refresh).
	firstWait = 150 * time.Millisecond
)

// Handler is the dashboard; see New.
type Handler struct {
	client *spool.Client
	opts   Options
	pages  map[string]*template.Template
	mux    *http.ServeMux
	// next is what ServeHTTP serves after its checks: mux, or the
	// handler Guard was given.
	next   http.Handler
	origin *http.CrossOriginProtection
	redact map[string]bool
	hosts  hostRules
	// stats are the queues' counts by state; throughput the chart's
	// buckets of every queue (cache.go).
	stats      *cache[queueCounts]
	throughput *cache[[]spool.ThroughputBucket]
}

// queueCounts are the counts and pauses the queues page shows.
type queueCounts struct {
	stats  []backend.QueueStats
	paused []spool.PausedQueue
}

// New returns the dashboard of client's store. The client need not be
// started; one made with an empty Config serves (the CLI's does), and a
// client of the application's also shows its periodic jobs and queue flows.
func New(client *spool.Client, opts *Options) (*Handler, error) {
	if client == nil {
		return nil, errors.New("spool ui: nil client")
	}
	h := &Handler{client: client, redact: map[string]bool{}}
	if opts != nil {
		h.opts = *opts
	}
	h.opts.Prefix = strings.TrimRight(h.opts.Prefix, "/")
	if h.opts.Prefix != "" && !strings.HasPrefix(h.opts.Prefix, "/") {
		return nil, fmt.Errorf("spool ui: prefix %q does not start with /", h.opts.Prefix)
	}
	if h.opts.Refresh == 0 {
		h.opts.Refresh = 2 * time.Second
	}
	if h.opts.Logger == nil {
		h.opts.Logger = slog.Default()
	}
	for _, k := range h.opts.RedactKinds {
		h.redact[k] = true
	}
	var err error
	if h.hosts, err = newHostRules(h.opts.AllowedHosts, h.opts.Authorize != nil); err != nil {
		return nil, err
	}
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	h.stats = &cache[queueCounts]{ttl: statsTTL, compute: func(ctx context.Context) (queueCounts, error) {
		stats, err := client.QueueStats(ctx)
		if err != nil {
			return queueCounts{}, err
		}
		paused, err := client.QueuesPaused(ctx)
		return queueCounts{stats: stats, paused: paused}, err
	}}
	h.throughput = &cache[[]spool.ThroughputBucket]{ttl: throughputTTL, compute: func(ctx context.Context) ([]spool.ThroughputBucket, error) {
		return client.JobThroughput(ctx, "", time.Hour, time.Minute)
	}}
	h.stats.warm()
	h.origin = http.NewCrossOriginProtection()
	h.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	p := h.opts.Prefix
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET "+p+"/static/", http.StripPrefix(p+"/static/", staticFiles(static)))
	m.HandleFunc("GET "+p+"/{$}", h.queuesPage)
	m.HandleFunc("GET "+p+"/jobs", h.jobsPage)
	m.HandleFunc("GET "+p+"/jobs/{id}", h.jobPage)
	m.HandleFunc("GET "+p+"/periodic", h.periodicPage)
	m.HandleFunc("GET "+p+"/workflows", h.workflowsPage)
	m.HandleFunc("GET "+p+"/workflows/{id}", h.workflowPage)
	m.HandleFunc("POST "+p+"/workflows/{id}/{action}", h.action(h.workflowAction))
	m.HandleFunc("GET "+p+"/batches", h.batchesPage)
	m.HandleFunc("GET "+p+"/batches/{id}", h.batchPage)
	m.HandleFunc("POST "+p+"/batches/{id}/{action}", h.action(h.batchAction))
	m.HandleFunc("GET "+p+"/limits", h.limitsPage)
	m.HandleFunc("GET "+p+"/api/throughput", h.throughputAPI)
	m.HandleFunc("POST "+p+"/jobs/{id}/{action}", h.action(h.jobAction))
	m.HandleFunc("POST "+p+"/queues/{action}", h.action(h.queueAction))
	h.mux, h.next = m, m
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	if !h.hostAllowed(r) {
		http.Error(w, h.hostRefusal(r), http.StatusMisdirectedRequest)
		return
	}
	if h.opts.Authorize != nil && !h.opts.Authorize(w, r) {
		return
	}
	h.next.ServeHTTP(w, r)
}

// Guard returns a handler that serves next behind the dashboard's own
// checks: the security headers, the allowed hosts and Authorize (a
// Prometheus endpoint beside the dashboard, as `spool ui` serves).
func (h *Handler) Guard(next http.Handler) http.Handler {
	g := *h
	g.next = next
	return &g
}

// csrfCookie holds the browser's CSRF secret; pages embed the same value in
// their forms and in htmx's request headers (double submit): another site
// can make the browser send the cookie but cannot read it to send it back.
const csrfCookie = "spool_ui_csrf"

// csrfToken returns the request's CSRF token, setting a new cookie when the
// browser has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: tok, Path: h.opts.Prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return tok
}

// action wraps a state-changing handler: read-only mode, a same-origin
// request and a CSRF token matching the browser's cookie, or 403.
func (h *Handler) action(next func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		if err := h.origin.Check(r); err != nil {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		c, err := r.Cookie(csrfCookie)
		sent := r.Header.Get("X-CSRF-Token")
		if sent == "" {
			sent = r.PostFormValue("csrf")
		}
		if err != nil || len(c.Value) < 32 || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sent)) != 1 {
			http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		if err := next(w, r); err != nil {
			h.fail(w, r, err)
		}
	}
}

// back answers a successful action: htmx refreshes the page it came from
// (or goes to target), a plain form post is redirected there.
func (h *Handler) back(w http.ResponseWriter, r *http.Request, target string) {
	if r.Header.Get("HX-Request") == "true" {
		if target != "" {
			w.Header().Set("HX-Location", target)
		} else {
			w.Header().Set("HX-Refresh", "true")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if target == "" {
		target = h.opts.Prefix + "/"
		// Back to the page the form was on: its path only, and only a
		// page of the dashboard (never a redirect to another site).
		if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host == r.Host {
			if p, ok := localPath(ref.EscapedPath()); ok && strings.HasPrefix(p, h.opts.Prefix+"/") {
				target = p
				if q := ref.RawQuery; q != "" && !strings.ContainsFunc(q, notURLByte) {
					target += "?" + q
				}
			}
		}
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// localPath cleans an escaped URL path that a browser reads as a path of
// this site, or reports false for one it may not: a browser takes
// "//host/x" for another site, and "/\host/x" too (a backslash is a slash
// in http URLs), and drops tabs and newlines before it reads a URL. An
// empty segment, a backslash (raw or %5C) or an escaped dot (which a
// browser resolves as a dot segment, out of the prefix the path seemed to
// have) is no path of the dashboard's, so each is refused outright; so is
// an escaped slash in the path, which decodes to an empty segment.
func localPath(escaped string) (string, bool) {
	lower := strings.ToLower(escaped)
	pathPart, _, _ := strings.Cut(lower, "?")
	if !strings.HasPrefix(escaped, "/") || strings.ContainsFunc(escaped, notURLByte) || strings.Contains(escaped, "//") ||
		strings.ContainsRune(escaped, '\\') || strings.Contains(lower, "%5c") || strings.Contains(lower, "%2e") ||
		strings.Contains(pathPart, "%2f") { // an encoded slash in the path: "/%2F" decodes to "//"
		return "", false
	}
	if _, err := url.PathUnescape(escaped); err != nil {
		return "", false // "%" without two hex digits
	}
	p := path.Clean(escaped)
	if strings.HasSuffix(escaped, "/") && p != "/" {
		p += "/"
	}
	return p, true
}

// notURLByte reports a rune that has no place unescaped in a URL's path or
// query as a browser sends it: controls, spaces and non-ASCII.
func notURLByte(r rune) bool { return r <= ' ' || r >= 0x7f }

// statusError is an error with the HTTP status it answers with.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// fail answers an error: its status for a statusError or a spool error
// the user caused (not found, invalid state), else 500 and a log line.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		http.Error(w, se.msg, se.code)
	case errors.Is(err, spool.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, spool.ErrInvalidState), errors.Is(err, spool.ErrInvalidJob),
		errors.Is(err, spool.ErrInvalidConfig), errors.Is(err, spool.ErrUniqueConflict):
		http.Error(w, err.Error(), http.StatusConflict)
	case errors.Is(err, context.Canceled):
		// The browser went away.
	default:
		// The cause stays in the log: a database's message names its
		// tables and settings, and is no help to the browser.
		ref := make([]byte, 6)
		_, _ = rand.Read(ref)
		id := hex.EncodeToString(ref)
		h.opts.Logger.Error("spool ui: request failed", "method", r.Method, "path", r.URL.Path, "ref", id, "error", err)
		http.Error(w, "internal error: the server's log has its cause (ref "+id+")", http.StatusInternalServerError)
	}
}

// staticFiles serves the embedded files, and nothing else: a directory or
// a name that is no file of files is 404 (http.FileServer lists
// directories, and answers 500 to a name fs.ValidPath refuses, such as
// invalid UTF-8). Browsers may keep the files for an hour.
func staticFiles(files fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fs.ValidPath(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		f, err := files.Open(r.URL.Path)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		rs, seekable := f.(io.ReadSeeker)
		if err != nil || st.IsDir() || !seekable {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		http.ServeContent(w, r, st.Name(), st.ModTime(), rs)
	})
}

// BasicAuth returns an Authorize that asks for HTTP basic authentication
// with this user and password, compared in constant time.
func BasicAuth(user, password string) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(user))&subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1 {
			return true
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="spool", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return false
	}
}

// tokenCookie keeps a TokenAuth token in the browser once given.
const tokenCookie = "spool_ui_token"

// TokenAuth returns an Authorize that admits requests carrying token: in an
// "Authorization: Bearer" header, or in a cookie that a first visit with
// "?token=" in the URL sets (that visit is then redirected to the same URL
// without it, so the token leaves the address bar and the history).
func TokenAuth(token string) func(http.ResponseWriter, *http.Request) bool {
	same := func(s string) bool { return s != "" && subtle.ConstantTimeCompare([]byte(s), []byte(token)) == 1 }
	return func(w http.ResponseWriter, r *http.Request) bool {
		if same(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			return true
		}
		if c, err := r.Cookie(tokenCookie); err == nil && same(c.Value) {
			return true
		}
		if q := r.URL.Query(); same(q.Get("token")) && r.Method == http.MethodGet {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			// The same page, but only ever a path of this site: a path
			// such as "//evil.example/" would send the browser away.
			target, ok := localPath(r.URL.EscapedPath())
			if !ok {
				target = "/"
			}
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return false
		}
		http.Error(w, "a token is required: open the URL that spool ui printed", http.StatusUnauthorized)
		return false
	}
}
