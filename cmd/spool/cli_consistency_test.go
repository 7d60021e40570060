package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// TestReadOnlyCommandsCreateNoStore: in an empty directory, with no
// database named, commands other than migrate create no spool.db: they
// say there is no store there and how to make one. A SQLite URL naming a
// missing file is refused the same way. migrate creates the default file
// and says so, once: later commands print no notice.
func TestReadOnlyCommandsCreateNoStore(t *testing.T) {
	t.Setenv(cli.EnvDatabaseURL, "")
	dir := t.TempDir()
	t.Chdir(dir)
	file := filepath.Join(dir, "spool.db")
	empty := func(when string) {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Fatalf("%s: the directory holds %v, want nothing", when, entries)
		}
	}
	for _, args := range [][]string{
		{"jobs", "list"}, {"jobs", "show", "1"}, {"jobs", "cancel", "1"}, {"jobs", "prune", "--older-than", "1h", "--state", "completed"},
		{"queues"}, {"queues", "pause", "mail"}, {"enqueue", "--kind", "k"},
	} {
		r := runSpool(t, args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "no Spool store here: "+file+" does not exist") ||
			!strings.Contains(r.Stderr, "spool migrate") || strings.Contains(r.Stderr, "creating") {
			t.Errorf("spool %v in an empty directory: exit %d, stderr %q; want exit 1 saying there is no store and to run spool migrate", args, r.Code, r.Stderr)
		}
		empty("after spool " + strings.Join(args, " "))
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"jobs", "list", "-h"}} {
		mustSpool(t, args...)
		empty("after spool " + strings.Join(args, " "))
	}
	other := filepath.Join(dir, "other.db")
	if r := runSpool(t, "jobs", "list", "--database-url", "sqlite://"+other); r.Code != 1 || !strings.Contains(r.Stderr, "no Spool store at "+other) {
		t.Errorf("jobs list of a missing file named by URL: exit %d, stderr %q", r.Code, r.Stderr)
	}
	empty("after a command on a missing file named by URL")

	r := mustSpool(t, "migrate")
	if want := "spool: no --database-url or $" + cli.EnvDatabaseURL + " given; creating the SQLite file " + file + "\n"; r.Stderr != want {
		t.Errorf("first migrate: stderr %q, want %q", r.Stderr, want)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("migrate created no store: %v", err)
	}
	for _, args := range [][]string{{"migrate"}, {"enqueue", "--kind", "k"}, {"jobs", "list"}, {"queues"}} {
		if r := mustSpool(t, args...); r.Stderr != "" {
			t.Errorf("spool %v on the existing store: stderr %q, want nothing", args, r.Stderr)
		}
	}
}

// TestJobsListNewestFirst: jobs list shows the newest jobs first, as the
// dashboard does, and pages on with --before-id; --oldest-first lists in
// ascending order and pages on with --after-id. The hint for the next page
// names the flags to use.
func TestJobsListNewestFirst(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	var ids []int64
	for range 5 {
		id, err := strconv.ParseInt(strings.TrimSpace(mustSpool(t, "enqueue", "--database-url", db, "--kind", "k").Stdout), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	listIDs := func(args ...string) []int64 {
		t.Helper()
		r := mustSpool(t, append([]string{"jobs", "list", "--json", "--database-url", db}, args...)...)
		var jobs []jobJSON
		if err := json.Unmarshal([]byte(r.Stdout), &jobs); err != nil {
			t.Fatalf("jobs list --json: %v\n%s", err, r.Stdout)
		}
		var got []int64
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		return got
	}
	// hint is what the table lists with args says of the next page.
	hint := func(args ...string) string {
		t.Helper()
		return mustSpool(t, append([]string{"jobs", "list", "--database-url", db}, args...)...).Stderr
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	if got := listIDs(); !slices.Equal(got, newest) {
		t.Errorf("jobs list: ids %v, want newest first %v", got, newest)
	}
	if got := listIDs("--oldest-first"); !slices.Equal(got, ids) {
		t.Errorf("jobs list --oldest-first: ids %v, want %v", got, ids)
	}

	if got := listIDs("--limit", "2"); !slices.Equal(got, newest[:2]) {
		t.Errorf("first page newest first: ids %v, want %v", got, newest[:2])
	}
	if h, want := hint("--limit", "2"), "more with --before-id "+strconv.FormatInt(newest[1], 10); !strings.Contains(h, want) {
		t.Errorf("first page newest first: hint %q lacks %q", h, want)
	}
	if got := listIDs("--limit", "2", "--before-id", strconv.FormatInt(newest[1], 10)); !slices.Equal(got, newest[2:4]) {
		t.Errorf("second page newest first: ids %v, want %v", got, newest[2:4])
	}
	if got := listIDs("--limit", "2", "--oldest-first"); !slices.Equal(got, ids[:2]) {
		t.Errorf("first page oldest first: ids %v, want %v", got, ids[:2])
	}
	if h, want := hint("--limit", "2", "--oldest-first"), "more with --oldest-first --after-id "+strconv.FormatInt(ids[1], 10); !strings.Contains(h, want) {
		t.Errorf("first page oldest first: hint %q lacks %q", h, want)
	}
	if got := listIDs("--limit", "2", "--oldest-first", "--after-id", strconv.FormatInt(ids[1], 10)); !slices.Equal(got, ids[2:4]) {
		t.Errorf("second page oldest first: ids %v, want %v", got, ids[2:4])
	}
	if r := mustSpool(t, "jobs", "list", "--database-url", db); !strings.Contains(strings.SplitN(r.Stdout, "\n", 3)[1], strconv.FormatInt(newest[0], 10)) {
		t.Errorf("table: first row is not the newest job %d:\n%s", newest[0], r.Stdout)
	}
}

// TestQueuesPauseUnknown: pausing a queue the store knows nothing of (no
// job, not paused) is refused, naming the known queues and --force, and
// pauses nothing; --force pauses it; a queue with jobs, or paused
// already, pauses without it.
func TestQueuesPauseUnknown(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	mustSpool(t, "enqueue", "--database-url", db, "--kind", "k", "--queue", "mail")
	paused := func() []string {
		t.Helper()
		var qs []queueJSON
		if err := json.Unmarshal([]byte(mustSpool(t, "queues", "--json", "--database-url", db).Stdout), &qs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range qs {
			if q.PausedSince != nil {
				out = append(out, q.Queue)
			}
		}
		return out
	}
	r := runSpool(t, "queues", "pause", "mial", "--database-url", db)
	if r.Code != 1 || r.Stdout != "" {
		t.Fatalf("pause of an unknown queue: exit %d, stdout %q; want exit 1 and nothing paused", r.Code, r.Stdout)
	}
	for _, want := range []string{`queue "mial" has no jobs`, "is not paused", "Queues with jobs or paused: mail.", "--force"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("refusal %q lacks %q", r.Stderr, want)
		}
	}
	if got := paused(); len(got) != 0 {
		t.Fatalf("a refused pause paused %v", got)
	}
	if r := mustSpool(t, "queues", "pause", "mial", "--force", "--database-url", db); !strings.Contains(r.Stdout, "queue mial paused") {
		t.Errorf("pause --force said %q", r.Stdout)
	}
	mustSpool(t, "queues", "pause", "mial", "--database-url", db) // paused already: known
	mustSpool(t, "queues", "pause", "mail", "--database-url", db) // has a job
	if got := paused(); !slices.Equal(got, []string{"mail", "mial"}) {
		t.Errorf("paused queues: %v, want [mail mial]", got)
	}
	if r := runSpool(t, "queues", "resume", "mail", "--force", "--database-url", db); r.Code != 2 || !strings.Contains(r.Stderr, "--force applies to queues pause NAME only") {
		t.Errorf("resume --force: exit %d, stderr %q; want a usage error", r.Code, r.Stderr)
	}
}

// TestUsageListsEverySubcommand: the program's usage lists every command
// main dispatches, and every subcommand of those that have some, as
// "command subcommand", each at the start of a line.
func TestUsageListsEverySubcommand(t *testing.T) {
	m := NewMain(nil, nil)
	usage := m.Usage()
	listed := func(name string) bool {
		return regexp.MustCompile(`(?m)^\t` + regexp.QuoteMeta(name) + ` `).MatchString(usage)
	}
	for name, cmd := range m.commands() {
		if !listed(name) {
			t.Errorf("usage does not list the command %q:\n%s", name, usage)
		}
		if sc, ok := cmd.(subcommander); ok {
			for _, sub := range sc.subcommandNames() {
				if !listed(name + " " + sub) {
					t.Errorf("usage does not list %q:\n%s", name+" "+sub, usage)
				}
			}
		}
	}
}

// TestVersionListsEachBackendOnce: spool version names each backend built
// in once, with every scheme it answers to.
func TestVersionListsEachBackendOnce(t *testing.T) {
	out := mustSpool(t, "version").Stdout
	_, list, ok := strings.Cut(out, "backends: ")
	if !ok {
		t.Fatalf("version output %q names no backends", out)
	}
	// One entry per backend: its first scheme, its others in parentheses.
	list = strings.TrimSuffix(strings.TrimSpace(list), ")")
	entries := strings.Split(regexp.MustCompile(` \([^)]*\)`).ReplaceAllString(list, ""), ", ")
	var want []string
	for _, schemes := range backend.Backends() {
		want = append(want, schemes[0])
	}
	if !slices.Equal(entries, want) {
		t.Errorf("version lists the backends %q as %v, want one entry each: %v", list, entries, want)
	}
	for _, s := range backend.Schemes() {
		if n := len(regexp.MustCompile(`\b`+regexp.QuoteMeta(s)+`\b`).FindAllString(list, -1)); n != 1 {
			t.Errorf("scheme %s named %d times in %q, want once", s, n, list)
		}
	}
	if len(backend.Backends()) >= len(backend.Schemes()) {
		t.Fatalf("no backend of the CLI has two schemes (%v): the test shows nothing", backend.Schemes())
	}
}
