package scenarios

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestBenchContention(t *testing.T) {
	t.Setenv(asCLIEnv, "1") // for the children; this process checked at start
	dir := t.TempDir()
	r := mustLab(t, "contention", "--json", "--quiet", "--processes", "2", "--threads", "2", "--slow", "1",
		"--slow-duration", "100ms", "--delay", "20ms", "--database-url", "sqlite://"+filepath.Join(dir, "c.db"))
	var res contentionResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("json: %v", err)
	}
	if len(res.Runs) != 2 || res.Runs[0].Mode != "fair" || res.Runs[1].Mode != "backoff" {
		t.Fatalf("runs: %+v", res.Runs)
	}
	for _, run := range res.Runs {
		if run.Failed != 0 || run.ParentMS < 100 || run.FastestMS <= 0 || run.SlowestMS < run.FastestMS || run.ScriptMS < run.ParentMS {
			t.Errorf("inconsistent run: %+v", run)
		}
		// The short writers started 20 ms into a 100 ms hold of the lock.
		if run.FastestMS < 50 {
			t.Errorf("a short writer did not wait for the long transaction: %+v", run)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("scratch files left: %v", entries)
	}
	if r := runLab(t, "contention", "--database-url", "postgres://x@127.0.0.1/db"); r.Code != 2 {
		t.Errorf("contention on PostgreSQL: exit %d, want 2", r.Code)
	}
}
