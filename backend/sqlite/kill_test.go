package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

// writerChildEnv makes the test binary a child that inserts jobs into the
// file the variable names, without end, printing the last job number of
// every batch once its commit has returned.
const writerChildEnv = "SPOOL_SQLITE_WRITER_CHILD"

func runWriterChild(path string) {
	ctx := context.Background()
	be, err := sqlite.Open(ctx, "sqlite://"+path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	for n := 0; ; {
		jobs := make([]*backend.JobInsertParams, 50)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", MaxAttempts: 3,
				Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n+i))}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		n += len(jobs)
		fmt.Println("C", n)
	}
}

// TestKilledMidWrite: a process killed with SIGKILL while it writes leaves
// a database that opens, passes SQLite's integrity check and holds every job
// whose commit had returned.
func TestKilledMidWrite(t *testing.T) {
	if path := os.Getenv(writerChildEnv); path != "" {
		runWriterChild(path)
		return
	}
	be := newBackend(t, nil)
	path := be.Path()
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^TestKilledMidWrite$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		committed := 0
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) == 2 && f[0] == "C" {
				committed, _ = strconv.Atoi(f[1])
				if committed >= 1000 {
					break
				}
				continue
			}
			if strings.HasPrefix(lines.Text(), "ERR") {
				t.Fatalf("child: %s", lines.Text())
			}
		}
		// Killed while it goes on writing the next batches.
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		check, err := sqlite.OpenPath(context.Background(), path, &sqlite.Options{Separate: true})
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", round, err)
		}
		var integrity string
		if err := check.DB().QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
			t.Fatalf("round %d: integrity_check = %q, %v", round, integrity, err)
		}
		// Every round's child numbers its jobs from 0: after round r, each
		// committed number is there at least r+1 times.
		rows, err := check.DB().Query(`SELECT args->>'n', count(*) FROM spool_jobs GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]int{}
		for rows.Next() {
			var n, c int
			if err := rows.Scan(&n, &c); err != nil {
				t.Fatal(err)
			}
			seen[n] = c
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < committed; n++ {
			if seen[n] < round+1 {
				t.Fatalf("round %d: job %d of the %d committed ones is missing", round, n, committed)
			}
		}
		if err := check.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
