package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/conformance"
)

// TestUIRefusesOpenAddressWithoutAuth: an address other machines reach
// needs --token or --basic-auth; weak credentials and both at once are
// usage errors. Nothing is served.
func TestUIRefusesOpenAddressWithoutAuth(t *testing.T) {
	db := sqliteStore(t)
	for _, args := range [][]string{
		{"ui", "--addr", "0.0.0.0:0"},
		{"ui", "--addr", "[::]:0"},
		{"ui", "--addr", "127.0.0.1:0", "--token", "short"},
		{"ui", "--addr", "127.0.0.1:0", "--basic-auth", "nopassword"},
		{"ui", "--addr", "127.0.0.1:0", "--basic-auth", "u:short"},
		{"ui", "--addr", "127.0.0.1:0", "--token", "random", "--basic-auth", "u:longenough"},
		{"ui", "--addr", "nonsense"},
	} {
		r := runSpool(t, append(args, "--database-url", db)...)
		if r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2 (usage)\n%s", args, r.Code, r.Stderr)
		}
	}
	r := runSpool(t, "ui", "--addr", "0.0.0.0:0", "--database-url", db)
	if !strings.Contains(r.Stderr, "--token") {
		t.Errorf("the refusal does not say what to give:\n%s", r.Stderr)
	}
}

// TestUIServes: spool ui prints its URL, the token in it admits a browser
// (then a cookie does), a request without it is refused, and the process
// stops on its context.
func TestUIServes(t *testing.T) {
	db := sqliteStore(t)
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail")
	var stdout, stderr conformance.LogBuffer
	m := NewMain(&stdout, &stderr)
	urls := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	cmd := &UICommand{m: m, ready: func(u string) { urls <- u }}
	go func() {
		done <- cli.Exit(&m.Env, cmd.Run(ctx, []string{"--addr", "127.0.0.1:0", "--token", "random", "--database-url", db}))
	}()
	var u string
	select {
	case u = <-urls:
	case code := <-done:
		t.Fatalf("spool ui exited %d: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("spool ui did not start")
	}
	if !strings.Contains(u, "?token=") {
		t.Fatalf("printed URL %q carries no token", u)
	}
	base := u[:strings.Index(u, "?")]
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err = c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-queue="mail"`) {
		t.Fatalf("with the printed URL: %d\n%s", resp.StatusCode, body)
	}
	if resp.Request.URL.RawQuery != "" {
		t.Errorf("the token stayed in the address: %s", resp.Request.URL)
	}
	// Metrics, behind the same token.
	resp, err = http.Get(base + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without the token: %d, want 401", resp.StatusCode)
	}
	resp, err = c.Get(base + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `spool_queue_jobs{queue="mail",state="available"} 1`) {
		t.Errorf("metrics: %d\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("metrics lack the pages' security headers: %v", resp.Header)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the stop: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("spool ui did not stop")
	}
	if !strings.Contains(stdout.String(), "spool ui: serving http://127.0.0.1:") {
		t.Errorf("stdout: %q", stdout.String())
	}
}

// TestUIAllowedHosts: without auth, spool ui answers to loopback names and
// refuses any other Host (DNS rebinding) with 421, on its pages and its
// metrics, saying how to admit one; --allowed-host admits a name.
func TestUIAllowedHosts(t *testing.T) {
	db := sqliteStore(t)
	var stdout, stderr conformance.LogBuffer
	m := NewMain(&stdout, &stderr)
	urls := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	cmd := &UICommand{m: m, ready: func(u string) { urls <- u }}
	go func() {
		done <- cli.Exit(&m.Env, cmd.Run(ctx, []string{"--addr", "127.0.0.1:0", "--allowed-host", "dash.internal", "--database-url", db}))
	}()
	var u string
	select {
	case u = <-urls:
	case code := <-done:
		t.Fatalf("spool ui exited %d: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("spool ui did not start")
	}
	port := u[strings.LastIndex(u, ":")+1 : len(u)-1]
	for _, path := range []string{"", "metrics"} {
		for host, want := range map[string]int{"localhost:" + port: 200, "dash.internal:" + port: 200, "evil.example:" + port: 421} {
			req, _ := http.NewRequest(http.MethodGet, u+path, nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("/%s with Host %s: %d, want %d", path, host, resp.StatusCode, want)
			}
			if want == 421 && (!strings.Contains(string(body), "--allowed-host") || !strings.Contains(string(body), "dash.internal")) {
				t.Errorf("the refusal does not say how to admit a host: %s", body)
			}
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after the stop: %s", code, stderr.String())
	}
	r := runSpool(t, "ui", "--addr", "127.0.0.1:0", "--allowed-host", "dash.internal:8080", "--database-url", db)
	if r.Code == 0 || !strings.Contains(r.Stderr, "dash.internal:8080") {
		t.Errorf("a host with a port: exit %d\n%s", r.Code, r.Stderr)
	}
}
