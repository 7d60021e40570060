package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// consumerPostgresURL is the shared test server (as internal/testkit's);
// $SPOOL_TEST_POSTGRES_URL overrides it.
func consumerPostgresURL() string {
	if u := os.Getenv("SPOOL_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgApp works one job on PostgreSQL with the released modules, in a schema
// of its own; "drop" removes that schema.
const pgApp = `package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
)

type hello struct {
	Name string ` + "`json:\"name\"`" + `
}

func (hello) Kind() string { return "hello" }

func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "pgapp:", err)
		os.Exit(1)
	}
}

func run(mode, dbURL, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if mode == "drop" {
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		return err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("spool_schema", schema)
	u.RawQuery = q.Encode()
	be, err := postgres.Open(ctx, u.String())
	if err != nil {
		return err
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		return err
	}
	done := make(chan string, 1)
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, j *spool.Job[hello]) error {
		done <- j.Args.Name
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
	})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	res, err := c.Insert(ctx, hello{Name: "consumer"}, nil)
	if err != nil {
		return err
	}
	select {
	case name := <-done:
		fmt.Printf("worked job %d: hello %s\n", res.ID, name)
	case <-ctx.Done():
		return fmt.Errorf("job %d not worked: %w", res.ID, ctx.Err())
	}
	return c.Stop(ctx)
}
`

// integrationsApp uses the root module on the memory backend with cron,
// Prometheus metrics and the dashboard.
const integrationsApp = `package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/cron"
	spoolprom "github.com/spoolq/spool/prometheus"
	"github.com/spoolq/spool/ui"
)

func main() {
	metrics := spoolprom.New(nil)
	c, err := spool.NewClient(memory.New(), &spool.Config{Observers: []spool.Observer{metrics}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := ui.New(c, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := cron.Parse("*/5 * * * *", time.UTC)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("next:", s.Next(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)).Format(time.RFC3339))
}
`

// TestConsumer uses the modules as an application outside the repository
// does: from a module proxy built from the working tree at a release
// version, with the go command alone (GOWORK=off). It works a job on
// PostgreSQL, installs the CLI, and checks that applications pull only the
// modules they use. The shared PostgreSQL must answer: a missing server
// fails the test.
func TestConsumer(t *testing.T) {
	start := time.Now()
	ws, err := LoadWorkspace(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	base, err := SharedVersion(ws)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	p, err := NewLocalProxy(ws, base, tmp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("proxy of the working tree at %s built in %s", p.Version, time.Since(start).Round(time.Millisecond))
	// -mod=mod lets go get and go build record what they add, as a new
	// application's first build does.
	env := append(p.Env, "GOFLAGS=-mod=mod", "GOBIN="+filepath.Join(tmp, "bin"))
	goRun := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	newApp := func(name, source string, modules ...string) string {
		t.Helper()
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		goRun(dir, "mod", "init", "example.com/"+name)
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(source), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"get"}
		for _, m := range modules {
			args = append(args, m+"@"+p.Version)
		}
		goRun(dir, args...)
		goRun(dir, "mod", "tidy")
		goRun(dir, "build", "-o", name, ".")
		return dir
	}
	modulesOf := func(dir string) []string {
		t.Helper()
		return strings.Fields(goRun(dir, "list", "-m", "-f", "{{.Path}}", "all"))
	}

	// A PostgreSQL application: works a job; its module graph holds no
	// SQLite or MySQL driver.
	pgDir := newApp("pgapp", pgApp, rootModulePath+"/backend/postgres")
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "spool_consumer_" + hex.EncodeToString(b[:])
	runApp := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(pgDir, "pgapp"), args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := runApp("drop", consumerPostgresURL(), schema); err != nil {
			t.Errorf("drop schema %s: %v\n%s", schema, err, out)
		}
	})
	out, err := runApp("work", consumerPostgresURL(), schema)
	if err != nil {
		t.Fatalf("the PostgreSQL application (needs the server at %s): %v\n%s", consumerPostgresURL(), err, out)
	}
	if !strings.Contains(out, "hello consumer") {
		t.Errorf("the PostgreSQL application printed %q, want the job worked", out)
	}
	drivers := []string{"github.com/mattn/go-sqlite3", "modernc.org/sqlite", "github.com/go-sql-driver/mysql"}
	forbidden := append(drivers[:len(drivers):len(drivers)], rootModulePath+"/backend/sqlite", rootModulePath+"/backend/mysql")
	pgModules := modulesOf(pgDir)
	for _, m := range pgModules {
		for _, f := range forbidden {
			if m == f {
				t.Errorf("the PostgreSQL application's module graph has %s", m)
			}
		}
	}
	if !slices.Contains(pgModules, rootModulePath+"/backend/postgres") {
		t.Errorf("the PostgreSQL application's module graph lacks backend/postgres: %v", pgModules)
	}

	// An application on the memory backend with cron, Prometheus and the
	// dashboard: no backend module, no database driver.
	intDir := newApp("intapp", integrationsApp, rootModulePath, rootModulePath+"/cron", rootModulePath+"/prometheus", rootModulePath+"/ui")
	cmd := exec.Command(filepath.Join(intDir, "intapp"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "next: 2026-01-01T00:05:00Z") {
		t.Errorf("the integrations application: %v\n%s", err, out)
	}
	allowed := map[string]bool{rootModulePath: true, rootModulePath + "/cron": true, rootModulePath + "/prometheus": true, rootModulePath + "/ui": true}
	for _, m := range modulesOf(intDir) {
		if strings.HasPrefix(m, rootModulePath+"/") && !allowed[m] {
			t.Errorf("the integrations application's module graph has %s, which it does not import", m)
		}
		for _, f := range append(drivers, "github.com/jackc/pgx/v5", "github.com/chromedp/chromedp") {
			if m == f {
				t.Errorf("the integrations application's module graph has %s", m)
			}
		}
	}

	// The CLI, installed by version.
	goRun(tmp, "install", rootModulePath+"/cmd/spool@"+p.Version)
	version, err := exec.Command(filepath.Join(tmp, "bin", "spool"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("spool version: %v\n%s", err, version)
	}
	if !strings.Contains(string(version), "spool "+p.Version) {
		t.Errorf("spool version printed %q, want the installed version %s", version, p.Version)
	}
	t.Logf("consumer test took %s", time.Since(start).Round(time.Second))
}
