package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestUpgradeFrom8WithJobs: a file at schema 8 holding pending jobs, with
// and without flow keys, upgrades to the latest schema; the flow indexes
// and the finished rows' index then test their NULL column first, and every job is still claimed once, in order,
// with what the claim returns matching what JobGet reads.
func TestUpgradeFrom8WithJobs(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "u.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, stmt.createMigrationsTable); err != nil {
			return err
		}
		for _, m := range migrations[:8] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, stmt.recordMigration, m.Version, m.Name, time.Now().UnixMicro()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != 8 {
		t.Fatalf("schema version %+v, %v; want 8", v, err)
	}
	var jobs []*backend.JobInsertParams
	for i := range 30 {
		j := &backend.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`),
			MaxAttempts: 5, Tags: []string{}, Metadata: json.RawMessage(`{"m":1}`)}
		if i%3 == 0 {
			j.FlowKey = "key" + string(rune('a'+i%2))
			j.Tags = []string{"t"}
		}
		jobs = append(jobs, j)
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != LatestVersion() || LatestVersion() < 9 {
		t.Fatalf("schema version %+v, %v; want %d (at least 9)", v, err, LatestVersion())
	}
	for name, want := range map[string]string{
		"spool_jobs_flow":       "WHERE flow_key IS NOT NULL AND state IN",
		"spool_jobs_flow_order": "WHERE flow_key IS NOT NULL AND state IN",
		"spool_jobs_finished":   "WHERE finalized_at IS NOT NULL AND state IN",
	} {
		var ddl string
		if err := be.st.readers.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = ?`, name).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ddl, want) {
			t.Errorf("%s after the upgrade: %s", name, ddl)
		}
	}
	use, err := be.QueueFlowUse(ctx, &backend.QueueFlowUseParams{Queue: "q", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]int{}
	for _, u := range use {
		pending[u.Key] = u.Pending
	}
	if pending["keya"] != 5 || pending["keyb"] != 5 || pending[""] != 20 {
		t.Errorf("pending by key after the upgrade: %v", pending)
	}
	got, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 100, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 {
		t.Fatalf("claimed %d of 30 jobs", len(got))
	}
	for i, j := range got {
		if i > 0 && got[i-1].ID >= j.ID {
			t.Fatalf("claim order: %d before %d", got[i-1].ID, j.ID)
		}
		stored, err := be.JobGet(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(j)
		b, _ := json.Marshal(stored)
		if string(a) != string(b) {
			t.Errorf("claimed row differs from the stored one:\n claimed %s\n stored  %s", a, b)
		}
	}
}
