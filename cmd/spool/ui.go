package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
	spoolprom "github.com/spoolq/spool/prometheus"
	"github.com/spoolq/spool/ui"
)

// UICommand serves the web dashboard.
type UICommand struct {
	m *Main
	// ready, when set (tests), receives the dashboard's URL once it serves.
	ready func(url string)
}

// envUIToken names the environment variable that gives --token.
const envUIToken = "SPOOL_UI_TOKEN"

// Run implements Command.
func (c *UICommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ui", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; one that is not loopback needs --token or --basic-auth")
	token := fs.String("token", "", "require this token (the printed URL carries it once; then a cookie); also $"+envUIToken+"; \"random\" makes one")
	basic := fs.String("basic-auth", "", "require HTTP basic authentication as USER:PASSWORD")
	readOnly := fs.Bool("read-only", false, "show everything, change nothing")
	prefix := fs.String("prefix", "", "serve under this path (for a reverse proxy), for example /spool")
	var redact cli.StringList
	fs.Var(&redact, "redact-kind", "never show the args of jobs of this kind (repeatable)")
	var hosts cli.StringList
	fs.Var(&hosts, "allowed-host", "also answer to this host name (repeatable; .example.com admits its subdomains, * any host)")
	if _, err := cli.ParseFlags(fs, args, c.Usage()); err != nil {
		return err
	}
	if *token == "" {
		*token = os.Getenv(envUIToken)
	}
	if *token == "random" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		*token = hex.EncodeToString(b)
	}
	if *token != "" && *basic != "" {
		return cli.Usagef("ui", "give --token or --basic-auth, not both")
	}
	opts := &ui.Options{Prefix: *prefix, ReadOnly: *readOnly, RedactKinds: redact, AllowedHosts: hosts}
	switch {
	case *token != "":
		if len(*token) < 16 {
			return cli.Usagef("ui", "--token must be at least 16 characters (--token random makes one)")
		}
		opts.Authorize = ui.TokenAuth(*token)
	case *basic != "":
		user, pass, ok := strings.Cut(*basic, ":")
		if !ok || user == "" || len(pass) < 8 {
			return cli.Usagef("ui", "--basic-auth wants USER:PASSWORD with a password of at least 8 characters")
		}
		opts.Authorize = ui.BasicAuth(user, pass)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return cli.Usagef("ui", "--addr %q: %v", *addr, err)
	}
	if opts.Authorize == nil && !loopback(host) {
		return cli.Usagef("ui", "--addr %s is reachable from other machines: give --token (--token random makes one) or --basic-auth USER:PASSWORD", *addr)
	}
	client, closeClient, err := openClientWaiting(ctx, c.m, *dbURL, true)
	if err != nil {
		return err
	}
	defer closeClient()
	h, err := ui.New(client, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("spool ui: %w", err)
	}
	srv := &http.Server{Handler: withMetrics(h, client, *prefix), ReadHeaderTimeout: 10 * time.Second}
	u := url.URL{Scheme: "http", Host: ln.Addr().String(), Path: strings.TrimRight(*prefix, "/") + "/"}
	if *token != "" {
		u.RawQuery = url.Values{"token": {*token}}.Encode()
	}
	fmt.Fprintf(c.m.Stdout, "spool ui: serving %s (Ctrl-C stops)\n", u.String())
	if c.ready != nil {
		c.ready(u.String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("spool ui: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("spool ui: stop: %w", err)
	}
	return nil
}

// withMetrics serves Prometheus metrics at PREFIX/metrics beside the
// dashboard, behind its checks (security headers, allowed hosts,
// authorization): the store's jobs by queue and state and the oldest jobs'
// ages (this process runs no jobs, so the counters of work stay at zero
// here), and the process's own.
func withMetrics(dashboard *ui.Handler, client *spool.Client, prefix string) http.Handler {
	m := spoolprom.New(nil)
	m.WatchStore(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("GET "+strings.TrimRight(prefix, "/")+"/metrics", dashboard.Guard(metrics))
	mux.Handle("/", dashboard)
	return mux
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Usage implements Command.
func (c *UICommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool ui [flags]

Serves the web dashboard and prints its URL: queues (counts by state,
finished jobs per minute over the last hour, pause and resume), jobs (filter
by queue, kind, state and insert time; newest first), each job (args,
metadata, output, errors with stack traces, timeline; retry, cancel,
delete), and flow keys' use. Pages refresh in place. Prometheus metrics of
the store (jobs by queue and state, the oldest jobs' ages) are served at
/metrics, behind the same authentication. Every action asks for
confirmation and carries a CSRF token.

It listens on 127.0.0.1:8080 unless --addr says otherwise; an address that
other machines reach needs --token or --basic-auth. Applications can mount
the same dashboard in their own server (package github.com/spoolq/spool/ui).
Like migrate, it waits for a database that cannot be reached yet.

Flags:

	--addr HOST:PORT
		address to listen on (default 127.0.0.1:8080; port 0 picks one)
	--token TOKEN
		require TOKEN (at least 16 characters; "random" makes one, also
		$SPOOL_UI_TOKEN): the printed URL carries it once, then a cookie
		keeps it; API clients send "Authorization: Bearer TOKEN"
	--basic-auth USER:PASSWORD
		require HTTP basic authentication instead
	--read-only
		show everything, change nothing (actions answer 403)
	--prefix PATH
		serve under PATH, for a reverse proxy (for example /spool)
	--redact-kind KIND
		never show the args of KIND's jobs (repeatable)
	--allowed-host NAME
		also answer to host name NAME (repeatable; ".example.com" admits
		the domain and its subdomains, "*" any host). Without --token or
		--basic-auth the dashboard answers only to localhost, loopback
		addresses and the address it listens on, and refuses any other
		Host with 421: a site whose name points at this machine (DNS
		rebinding) would otherwise be same-origin with it. With them, any
		host is admitted unless --allowed-host names some
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
