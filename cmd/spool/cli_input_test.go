package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli/clitest"
)

// sqliteStore returns the URL of a migrated SQLite store of the test's own.
func sqliteStore(t *testing.T) string {
	t.Helper()
	db := "sqlite://" + filepath.Join(t.TempDir(), "spool.db")
	mustSpool(t, "migrate", "--database-url", db)
	return db
}

// runSpoolIn runs the CLI with stdin as its standard input.
func runSpoolIn(t *testing.T, stdin io.Reader, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, execMain, stdin, args...)
}

// TestJobIDMustBePositive: jobs show, cancel and retry refuse an id that is
// not a positive integer, negative numbers included (which the flag package
// would take for undefined flags), and change nothing.
func TestJobIDMustBePositive(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	mustSpool(t, "enqueue", "--kind", "k", "--database-url", db)
	for _, cmd := range []string{"show", "cancel", "retry"} {
		for _, id := range []string{"-5", "-1.5", "0", "abc", "1.5", "99999999999999999999", "-0"} {
			for _, args := range [][]string{
				{"jobs", cmd, id, "--database-url", db},
				{"jobs", cmd, "--database-url", db, "--json", id},
			} {
				r := runSpool(t, args...)
				want := `job id "` + id + `" is not a positive integer`
				if r.Code != 2 || !strings.Contains(r.Stderr, want) {
					t.Errorf("spool %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(args, " "), r.Code, r.Stderr, want)
				}
			}
		}
	}
	jobs := listJobs(t, db)
	if len(jobs) != 1 || jobs[0].State != "available" {
		t.Fatalf("after refused commands: %+v, want the one job still available", jobs)
	}
	// A negative number that is a flag's value is still that value.
	r := runSpool(t, "enqueue", "--kind", "k", "--priority", "-5", "--database-url", db)
	if r.Code == 0 || !strings.Contains(r.Stderr, "priority") {
		t.Errorf("enqueue --priority -5: exit %d, stderr %q; want the priority refused", r.Code, r.Stderr)
	}
}

// TestEnqueueArgsFromFileAndStdin: --args @FILE and --args - take args
// larger than one command-line argument, up to the args limit; what is over
// it, a missing file and empty input are refused and write nothing.
func TestEnqueueArgsFromFileAndStdin(t *testing.T) {
	t.Parallel()
	db := sqliteStore(t)
	dir := t.TempDir()
	// About 900 KiB: more than a Linux command-line argument (128 KiB) holds.
	big, err := json.Marshal(map[string]any{"blob": strings.Repeat("spool ", 150_000), "n": 7})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "args.json")
	if err := os.WriteFile(file, big, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := mustSpool(t, "enqueue", "--kind", "big", "--args", "@"+file, "--database-url", db)
	fromStdin := runSpoolIn(t, bytes.NewReader(big), "enqueue", "--kind", "big", "--args", "-", "--database-url", db)
	if fromStdin.Code != 0 {
		t.Fatalf("enqueue --args -: exit %d: %s", fromStdin.Code, fromStdin.Stderr)
	}
	for _, out := range []string{fromFile.Stdout, fromStdin.Stdout} {
		r := mustSpool(t, "jobs", "show", "--json", strings.TrimSpace(out), "--database-url", db)
		var job struct {
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &job); err != nil {
			t.Fatal(err)
		}
		var got, want bytes.Buffer
		if err := json.Compact(&got, job.Args); err != nil {
			t.Fatal(err)
		}
		_ = json.Compact(&want, big)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("job %s: args of %d bytes stored as %d different bytes", strings.TrimSpace(out), want.Len(), got.Len())
		}
	}

	over := filepath.Join(dir, "over.json")
	if err := os.WriteFile(over, []byte(`"`+strings.Repeat("x", spool.DefaultMaxArgsBytes)+`"`), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name  string
		stdin io.Reader
		args  string
		want  string
	}{
		{"missing file", nil, "@" + filepath.Join(dir, "nope.json"), filepath.Join(dir, "nope.json")},
		{"file over the limit", nil, "@" + over, "over the limit of 1048576 bytes"},
		{"stdin over the limit", strings.NewReader(`"` + strings.Repeat("x", 2<<20) + `"`), "-", "over the limit of 1048576 bytes"},
		{"empty stdin", strings.NewReader(" \n"), "-", "is empty"},
		{"stdin not JSON", strings.NewReader("{"), "-", "not valid JSON"},
	}
	for _, tc := range refused {
		r := runSpoolIn(t, tc.stdin, "enqueue", "--kind", "big", "--args", tc.args, "--database-url", db)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q", tc.name, r.Code, r.Stderr, tc.want)
		}
	}
	if jobs := listJobs(t, db); len(jobs) != 2 {
		t.Fatalf("%d jobs stored, want the 2 accepted ones", len(jobs))
	}
}
