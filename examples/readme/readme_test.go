package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// block is one fenced code block of the README.
type block struct {
	lang, text string
	line       int
}

var fence = regexp.MustCompile("(?m)^```([a-z]*)\n")

func readmeBlocks(t *testing.T) (string, []block) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	var out []block
	for pos := 0; ; {
		m := fence.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		bodyStart := pos + m[1]
		end := strings.Index(s[bodyStart:], "\n```")
		if end < 0 {
			t.Fatalf("README.md: a code block opened at line %d never closes", strings.Count(s[:bodyStart], "\n"))
		}
		out = append(out, block{
			lang: s[pos+m[2] : pos+m[3]],
			text: s[bodyStart : bodyStart+end+1],
			line: strings.Count(s[:bodyStart], "\n"),
		})
		pos = bodyStart + end + 4
	}
	if len(out) == 0 {
		t.Fatal("README.md has no code blocks")
	}
	return root, out
}

// TestReadmeGoProgram checks that the README's Go block is this package's
// main.go, so that what a reader copies compiles (the package builds with
// the tests) and runs (TestReadmeGoProgramRuns).
func TestReadmeGoProgram(t *testing.T) {
	_, blocks := readmeBlocks(t)
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	want := string(src[bytes.Index(src, []byte("package main")):])
	found := 0
	for _, b := range blocks {
		if b.lang != "go" {
			continue
		}
		found++
		if b.text != want {
			t.Errorf("README.md line %d: the Go block differs from examples/readme/main.go (from its package clause on); copy the file into the README", b.line)
		}
	}
	if found != 1 {
		t.Errorf("README.md has %d Go blocks, want 1 (examples/readme/main.go)", found)
	}
}

// TestReadmeGoProgramRuns builds the README's program and runs it in an
// empty directory: it must send its three emails and exit 0.
func TestReadmeGoProgramRuns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "readme")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, to := range []string{"ada@example.com", "bob@example.com", "cy@example.com"} {
		if !strings.Contains(string(out), "sent to "+to+"\n") {
			t.Errorf("output lacks %q:\n%s", "sent to "+to, out)
		}
	}
}

// testCommand is the README's one test command; its block is not run here,
// as it is the command running this test.
const testCommand = ".ci/test"

// TestReadmeShellBlocks runs every sh block of the README in order, as
// written, in a copy of the repository (so that ./spool.db, which the
// quickstart and the CLI share, starts absent and leaves no trace), with no
// database named in the environment and the spool command built from the
// working tree first in PATH, as `go install` leaves it.
func TestReadmeShellBlocks(t *testing.T) {
	root, blocks := readmeBlocks(t)
	dir := copyRepo(t, root)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "spool"), "./cmd/spool")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/spool: %v\n%s", err, out)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "SPOOL_DATABASE_URL="):
		case strings.HasPrefix(kv, "PATH="):
			env = append(env, "PATH="+bin+string(filepath.ListSeparator)+strings.TrimPrefix(kv, "PATH="))
		default:
			env = append(env, kv)
		}
	}
	ran, testBlocks := 0, 0
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		if strings.TrimSpace(b.text) == testCommand {
			testBlocks++
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", b.text)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README.md line %d: the block fails: %v\n--- block:\n%s--- output:\n%s", b.line, err, b.text, out)
		}
		t.Logf("README.md line %d ran:\n%s", b.line, out)
		ran++
	}
	if ran < 2 {
		t.Fatalf("ran %d sh blocks, want the quickstart and the CLI at least", ran)
	}
	if testBlocks != 1 {
		t.Errorf("README.md has %d sh blocks holding just %s, want 1 (.ci/run checks it is there)", testBlocks, testCommand)
	}
}

// TestReadmeInstall checks that the README's install lines name exactly the
// modules a user gets: `go get` for each library module of the workspace,
// `go install …@latest` for the command, none for the examples, the
// modules of tests (internal/testkit, ui/dashtest), the release tool or the
// benchmarks.
func TestReadmeInstall(t *testing.T) {
	root, _ := readmeBlocks(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-m")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	const command = "github.com/spoolq/spool/cmd/spool"
	want := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		if m == command || strings.Contains(m, "/internal/") || strings.Contains(m, "/bench/") || strings.HasSuffix(m, "/examples") || strings.HasSuffix(m, "/dashtest") {
			continue
		}
		want[m] = true
	}
	got := map[string]bool{}
	for _, m := range regexp.MustCompile("`go get ([^ `@]+)`").FindAllStringSubmatch(string(raw), -1) {
		got[m[1]] = true
	}
	for m := range want {
		if !got[m] {
			t.Errorf("README.md has no `go get %s`", m)
		}
	}
	for m := range got {
		if !want[m] {
			t.Errorf("README.md says `go get %s`, which is not a library module of the workspace", m)
		}
	}
	if !strings.Contains(string(raw), "`go install "+command+"@latest`") {
		t.Errorf("README.md has no `go install %s@latest`", command)
	}
}

// TestDocsIndex checks that docs/README.md links every page of docs/, and
// that every relative link of README.md and docs/README.md names a file
// that exists.
func TestDocsIndex(t *testing.T) {
	root, _ := readmeBlocks(t)
	docs := filepath.Join(root, "docs")
	index, err := os.ReadFile(filepath.Join(docs, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(docs, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := filepath.Base(p)
		if name != "README.md" && !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	for _, doc := range []string{filepath.Join(root, "README.md"), filepath.Join(docs, "README.md")} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links %s: %v", doc, m[1], err)
			}
		}
	}
}

// copyRepo copies the files git knows of (tracked or not ignored) into a
// temporary directory.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) { // deleted in the working tree
				continue
			}
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReadmeSQLBlock runs the README's SQL on a fresh PostgreSQL database
// migrated with the default schema name, and checks the job it made.
func TestReadmeSQLBlock(t *testing.T) {
	_, blocks := readmeBlocks(t)
	var sqlText string
	for _, b := range blocks {
		if b.lang == "sql" {
			sqlText += b.text
		}
	}
	if sqlText == "" {
		t.Fatal("README.md has no SQL block")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.PostgresURL())
	if err != nil {
		t.Fatalf("connect to PostgreSQL (%s): %v", testdb.PostgresURL(), err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("spool_readme_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	be, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sqlText); err != nil {
		t.Fatalf("the README's SQL fails: %v\n%s", err, sqlText)
	}
	var kind, queue string
	var prio int
	if err := conn.QueryRow(ctx, "SELECT kind, queue, priority FROM spool.spool_jobs").Scan(&kind, &queue, &prio); err != nil {
		t.Fatal(err)
	}
	if kind != "send_email" || queue != "mail" || prio != 1 {
		t.Errorf("job made by the README's SQL: kind %q queue %q priority %d, want send_email, mail, 1", kind, queue, prio)
	}
}
