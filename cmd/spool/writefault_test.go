package main

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestCancelReplyLostSaysOutcomeUnknown: a cancel whose reply the network
// loses after it committed fails, and the CLI says plainly that the change
// may have been made and how to check; a bulk cancel says running it again
// is safe. A command run by hand with the database unreachable fails at
// once, saying so.
func TestCancelReplyLostSaysOutcomeUnknown(t *testing.T) {
	db := freshURL(t)
	mustSpool(t, "migrate", "--database-url", db)
	r := mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--args", `{}`)
	id := strings.TrimSpace(r.Stdout)
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--args", `{}`)

	// Through a proxy, every statement sent as text, for DropReplyTo.
	proxy := testdb.NewProxy(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	proxied := u.String()

	proxy.DropReplyTo("SET state = 'cancelled'")
	r = runSpool(t, "jobs", "cancel", id, "--database-url", proxied)
	if r.Code != 1 || !strings.Contains(r.Stderr, "outcome unknown") ||
		!strings.Contains(r.Stderr, "the change may or may not have been made") || !strings.Contains(r.Stderr, "spool jobs show "+id) {
		t.Fatalf("cancel whose reply was lost: exit %d, stderr:\n%s", r.Code, r.Stderr)
	}
	if jobs := listJobs(t, db, "--state", "cancelled"); len(jobs) != 1 || strconv.FormatInt(jobs[0].ID, 10) != id {
		t.Fatalf("cancelled jobs after the lost reply: %+v, want job %s (the cancel committed)", jobs, id)
	}

	proxy.DropReplyTo("commit\x00")
	r = runSpool(t, "jobs", "cancel", "--queue", "default", "--database-url", proxied)
	if r.Code != 1 || !strings.Contains(r.Stderr, "outcome unknown") || !strings.Contains(r.Stderr, "Running the command again is safe") {
		t.Fatalf("bulk cancel whose reply was lost: exit %d, stderr:\n%s", r.Code, r.Stderr)
	}
	r = mustSpool(t, "jobs", "cancel", "--queue", "default", "--database-url", proxied)
	if !strings.Contains(r.Stdout, "cancelled 0 jobs") {
		t.Fatalf("bulk cancel run again after its lost reply: %q, want 0 cancelled (the first run committed)", r.Stdout)
	}

	proxy.Cut()
	r = runSpool(t, "jobs", "list", "--database-url", proxied)
	if r.Code != 1 || !strings.Contains(r.Stderr, "store unavailable") || strings.Contains(r.Stderr, "trying again") {
		t.Fatalf("jobs list with the database unreachable: exit %d, stderr:\n%s", r.Code, r.Stderr)
	}
}

// TestMigrateWaitsForDatabase: migrate, which deployments start beside
// their database, waits for one it cannot reach yet, logging each try,
// until it is interrupted; jobs list fails at once.
func TestMigrateWaitsForDatabase(t *testing.T) {
	proxy := testdb.NewProxy(t)
	proxy.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	code := execMain(ctx, &cli.Env{Stdout: &stdout, Stderr: &stderr}, []string{"migrate", "--database-url", proxy.URL()})
	if code != 1 || !strings.Contains(stderr.String(), "cannot open the store yet; trying again") ||
		!strings.Contains(stderr.String(), "gave up after") || !strings.Contains(stderr.String(), "context deadline exceeded") {
		t.Fatalf("migrate with the database unreachable: exit %d, stderr:\n%s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "trying again"); n < 2 {
		t.Fatalf("migrate tried %d times in 2 s, want several:\n%s", n, stderr.String())
	}
}
