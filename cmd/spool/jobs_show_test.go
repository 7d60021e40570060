package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/spooltest"
)

type reportArgs struct {
	Month string `json:"month"`
}

func (reportArgs) Kind() string { return "report" }

// TestJobsShowOutput: spool jobs show prints the output and metadata a
// handler recorded, as text and as JSON.
func TestJobsShowOutput(t *testing.T) {
	db := sqliteStore(t)
	ctx := context.Background()
	be, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[reportArgs]) error {
		if err := spool.UpdateMetadata(ctx, map[string]any{"progress": 100}); err != nil {
			return err
		}
		return spool.RecordOutput(ctx, map[string]any{"rows": 42, "file": "report-" + j.Args.Month + ".csv"})
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	job := spooltest.Work(ctx, t, c, reportArgs{Month: "2030-01"}, nil)
	id := strconv.FormatInt(job.ID, 10)
	text := mustSpool(t, "jobs", "show", id, "--database-url", db).Stdout
	if !strings.Contains(text, `"file": "report-2030-01.csv"`) || !strings.Contains(text, `"progress": 100`) {
		t.Fatalf("jobs show does not print the output and metadata:\n%s", text)
	}
	var got struct {
		Output   map[string]any `json:"output"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(mustSpool(t, "jobs", "show", id, "--json", "--database-url", db).Stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Output["rows"] != float64(42) || got.Metadata["progress"] != float64(100) {
		t.Fatalf("jobs show --json: %+v", got)
	}
}
