package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/conformance"
)

// dirEntries lists a directory's names.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestOpenMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := sqlite.Open(context.Background(), "sqlite://"+filepath.Join(dir, "nope", "spool.db"))
	if !errors.Is(err, sqlite.ErrInvalidPath) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v, want ErrInvalidPath naming the missing directory", err)
	}
	if names := dirEntries(t, dir); len(names) != 0 {
		t.Fatalf("created %v", names)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	content := []byte("these are my notes, not a database\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), "sqlite://"+path)
	if !errors.Is(err, sqlite.ErrNotDatabase) {
		t.Fatalf("err = %v, want ErrNotDatabase", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
		t.Fatal("the file was changed")
	}
	if names := dirEntries(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the original file", names)
	}
}

func TestOpenBadURL(t *testing.T) {
	for _, dsn := range []string{"sqlite://", "sqlite://x.db?spool_busy=loud", "sqlite://x.db?spool_synchronous=off",
		"sqlite://x.db?spool_busy_timeout=-1s", "sqlite://x.db?journal_mode=delete", "sqlite://a?b.db"} {
		if _, err := sqlite.Open(context.Background(), dsn); err == nil {
			t.Errorf("%s: opened", dsn)
		}
	}
}

// TestNewerSchemaRefused: a database migrated by a newer Spool is refused
// by Migrate and by a client's Start, and nothing is written to it.
func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "newer.db")
	be, err := sqlite.OpenPath(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := be.DB().ExecContext(ctx, `INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, 'from_the_future', 0)`,
		sqlite.LatestVersion()+1); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil { // the last connection checkpoints the WAL into the file
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	be, err = sqlite.OpenPath(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); !errors.Is(err, backend.ErrSchemaTooNew) {
		t.Fatalf("migrate: %v, want ErrSchemaTooNew", err)
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[noteArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); !errors.Is(err, backend.ErrSchemaTooNew) {
		t.Fatalf("start: %v, want ErrSchemaTooNew", err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("the database file changed")
	}
}

type noteArgs struct {
	N int `json:"n"`
}

func (noteArgs) Kind() string { return "note" }

// roChildEnv makes the test binary a child that opens a database in the
// directory the variable names, as an unprivileged user, and reports.
const roChildEnv = "SPOOL_SQLITE_READONLY_CHILD"

// TestOpenReadOnlyDirectory: a directory the process may not write (SQLite
// needs it for the -wal and -shm files) is a clear error and nothing is
// created. Root may write anywhere, so as root the check runs in a child
// process of the test binary with the uid of nobody.
func TestOpenReadOnlyDirectory(t *testing.T) {
	if dir := os.Getenv(roChildEnv); dir != "" {
		_, err := sqlite.Open(context.Background(), "sqlite://"+filepath.Join(dir, "spool.db"))
		if errors.Is(err, sqlite.ErrInvalidPath) && strings.Contains(err.Error(), "not writable") {
			os.Stdout.WriteString("RO-OK\n")
			return
		}
		t.Fatalf("err = %v, want ErrInvalidPath: not writable", err)
	}
	base, err := os.MkdirTemp("", "spool-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		_, err := sqlite.Open(context.Background(), "sqlite://"+filepath.Join(ro, "spool.db"))
		if !errors.Is(err, sqlite.ErrInvalidPath) {
			t.Fatalf("err = %v, want ErrInvalidPath", err)
		}
	} else {
		// Copy the test binary where nobody can run it.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(base, "sqlite.test")
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^TestOpenReadOnlyDirectory$", "-test.count=1")
		cmd.Env = append(os.Environ(), roChildEnv+"="+ro, "HOME="+base)
		cmd.Dir = base
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("RO-OK")) {
			t.Fatalf("child as nobody: %v\n%s", err, out)
		}
	}
	if names := dirEntries(t, ro); len(names) != 0 {
		t.Fatalf("created %v", names)
	}
}

// TestForeignTransaction: InsertTx works in a transaction of the
// application's own pool on the same file; the job runs once committed.
func TestForeignTransaction(t *testing.T) {
	ctx := context.Background()
	be := newBackend(t, nil)
	db, err := sql.Open(sqlite.DriverSQLName, be.Path()+"?_txlock=immediate&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ran := make(chan int, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[noteArgs]) error {
		ran <- j.Args.N
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertTx(ctx, tx, noteArgs{N: 7}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := <-ran; n != 7 {
		t.Fatalf("ran %d", n)
	}
}
