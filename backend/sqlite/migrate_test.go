package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// openAtVersion opens a backend on a new file migrated up to version only.
func openAtVersion(t *testing.T, version int) *Backend {
	t.Helper()
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "u.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, stmt.createMigrationsTable); err != nil {
			return err
		}
		for _, m := range migrations[:version] {
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
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != version {
		t.Fatalf("schema version %+v, %v; want %d", v, err, version)
	}
	return be
}

// TestUpgradeFrom8WithJobs: a file at schema 8 holding pending jobs, with
// and without flow keys, upgrades to the latest schema; the flow indexes
// and the finished rows' index then test their NULL column first, and every job is still claimed once, in order,
// with what the claim returns matching what JobGet reads.
func TestUpgradeFrom8WithJobs(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 8)
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
		"spool_jobs_flow":       "WHERE flow_key IS NOT NULL AND (state = 'available' OR",
		"spool_jobs_flow_order": "WHERE flow_key IS NOT NULL AND (state = 'available' OR",
		"spool_jobs_finished":   "WHERE finalized_at IS NOT NULL",
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

// TestUpgradeFrom12WithJobs: a file at schema 12 holding jobs in every
// pending state, running and completed ones, upgrades to schema 13: the
// state's CHECK and the pending index test the state by comparisons, the
// CHECK still refuses an unknown state, the pending index holds exactly the
// pending jobs, and a claim takes the due ones in order.
func TestUpgradeFrom12WithJobs(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 12)
	var jobs []*backend.JobInsertParams
	for i := range 12 {
		jobs = append(jobs, &backend.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5, Priority: int16(i % 3)})
	}
	ins, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	ids := ins.IDs
	// Two running, two completed, two scheduled in an hour, two retryable
	// now: four stay available.
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`UPDATE spool_jobs SET state = 'running', leased_until = 1, fence = 1, attempt = 1 WHERE id IN (?1, ?2)`,
			`UPDATE spool_jobs SET state = 'completed', finalized_at = 1, attempt = 1 WHERE id IN (?3, ?4)`,
			`UPDATE spool_jobs SET state = 'scheduled', run_at = run_at + 3600000000 WHERE id IN (?5, ?6)`,
			`UPDATE spool_jobs SET state = 'retryable', attempt = 1 WHERE id IN (?7, ?8)`,
		} {
			if _, err := tx.ExecContext(ctx, q, ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current < 13 {
		t.Fatalf("schema version %+v, %v; want at least 13", v, err)
	}
	for name, want := range map[string]string{
		"spool_jobs":         "CHECK (state = 'available' OR state = 'scheduled' OR state = 'retryable' OR state = 'running'",
		"spool_jobs_pending": "WHERE state = 'available' OR state = 'scheduled' OR state = 'retryable'",
	} {
		var ddl string
		if err := be.st.readers.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = ?`, name).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ddl, want) || strings.Contains(ddl, "state IN") {
			t.Errorf("%s after the upgrade: %s", name, ddl)
		}
	}
	var pending int
	if err := be.st.readers.QueryRowContext(ctx, `SELECT count(*) FROM spool_jobs INDEXED BY spool_jobs_pending
WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = 'q'`).Scan(&pending); err != nil || pending != 8 {
		t.Fatalf("pending index: %d rows, %v; want 8", pending, err)
	}
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE spool_jobs SET state = 'paused' WHERE id = ?`, ids[11])
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Fatalf("unknown state written: %v", err)
	}
	claimInOrder(t, be, jobs, ids, append([]int64{ids[6], ids[7]}, ids[8:]...))
}

// claimInOrder claims up to 100 jobs of queue q and checks that it got
// want (ids of the inserted jobs, in any order) in claim order: priority,
// then id. It returns the claimed rows.
func claimInOrder(t *testing.T, be *Backend, jobs []*backend.JobInsertParams, ids, want []int64) []*backend.JobRow {
	t.Helper()
	got, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "q", Max: 100, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil {
		t.Fatal(err)
	}
	prio := map[int64]int16{}
	for i, id := range ids {
		prio[id] = jobs[i].Priority
	}
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b int64) int { return cmp.Or(cmp.Compare(prio[a], prio[b]), cmp.Compare(a, b)) })
	var gotIDs []int64
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
	}
	if !slices.Equal(gotIDs, want) {
		t.Fatalf("claimed %v, want %v", gotIDs, want)
	}
	return got
}

// TestUpgradeFrom15WithJobs: a file at schema 15 holding jobs in every
// state, half of them with flow keys, upgrades to schema 16, whose partial
// indexes have no IN lists: the flow indexes hold exactly the pending jobs
// with a key (and the keys' listing reads them), the index of finished
// rows, which names no state, exactly the completed, discarded and
// cancelled jobs; the
// reads that use it (retention's delete, the throughput and the awaited
// completions) still plan on it and read the same rows; a claim takes the
// due pending jobs in order, a kept completion enters the index, and
// retention deletes the old finished rows only.
func TestUpgradeFrom15WithJobs(t *testing.T) {
	ctx := context.Background()
	be := openAtVersion(t, 15)
	var jobs []*backend.JobInsertParams
	for i := range 16 {
		j := &backend.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5, Priority: int16(i % 3)}
		if i%2 == 0 {
			j.FlowKey = "f" + string(rune('0'+i%4/2))
		}
		jobs = append(jobs, j)
	}
	ins, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	ids := ins.IDs
	old := time.Now().Add(-time.Hour).UnixMicro()
	// ids 0-1 running, 2-3 completed, 4 discarded, 5 cancelled (finished an
	// hour ago), 6-7 scheduled in an hour, 8-9 retryable now, 10-11
	// waiting; 12-15 stay available.
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`UPDATE spool_jobs SET state = 'running', leased_until = ?13 + 600000000, leased_by = 'c#0', fence = 1, attempt = 1 WHERE id IN (?1, ?2)`,
			`UPDATE spool_jobs SET state = 'completed', finalized_at = ?13, attempt = 1 WHERE id IN (?3, ?4)`,
			`UPDATE spool_jobs SET state = 'discarded', finalized_at = ?13, attempt = 5 WHERE id = ?5`,
			`UPDATE spool_jobs SET state = 'cancelled', finalized_at = ?13 WHERE id = ?6`,
			`UPDATE spool_jobs SET state = 'scheduled', run_at = run_at + 3600000000 WHERE id IN (?7, ?8)`,
			`UPDATE spool_jobs SET state = 'retryable', attempt = 1 WHERE id IN (?9, ?10)`,
			`UPDATE spool_jobs SET state = 'waiting', wait_kind = 'deps', deps_left = 1 WHERE id IN (?11, ?12)`,
		} {
			if _, err := tx.ExecContext(ctx, q, ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7], ids[8], ids[9], ids[10], ids[11], old); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current < 16 {
		t.Fatalf("schema version %+v, %v; want at least 16", v, err)
	}
	for name, want := range map[string]string{
		"spool_jobs_finished":   "WHERE finalized_at IS NOT NULL",
		"spool_jobs_flow":       "WHERE flow_key IS NOT NULL AND (state = 'available' OR state = 'scheduled' OR state = 'retryable')",
		"spool_jobs_flow_order": "WHERE flow_key IS NOT NULL AND (state = 'available' OR state = 'scheduled' OR state = 'retryable')",
	} {
		var ddl string
		if err := be.st.readers.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = ?`, name).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(ddl, want) {
			t.Errorf("%s after the upgrade: %s", name, ddl)
		}
	}
	finished := func() []int64 {
		t.Helper()
		return storedIDs(t, be, `SELECT id FROM spool_jobs INDEXED BY spool_jobs_finished WHERE finalized_at IS NOT NULL ORDER BY id`)
	}
	// The flow indexes hold the pending jobs with a key: 6, 8, 12 and 14.
	wantFlow := []int64{ids[6], ids[8], ids[12], ids[14]}
	for _, index := range []string{"spool_jobs_flow", "spool_jobs_flow_order"} {
		got := storedIDs(t, be, `SELECT id FROM spool_jobs INDEXED BY `+index+`
WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND flow_key IS NOT NULL AND queue = 'q' ORDER BY id`)
		if !slices.Equal(got, wantFlow) {
			t.Errorf("%s holds %v, want %v", index, got, wantFlow)
		}
	}
	var keys []string
	rows, err := be.st.readers.QueryContext(ctx, stmt.flowKeys, "q", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil || !slices.Equal(keys, []string{"f0", "f1"}) {
		t.Fatalf("flow keys %v, %v; want [f0 f1]", keys, err)
	}
	if got := finished(); !slices.Equal(got, ids[2:6]) {
		t.Fatalf("finished index holds %v, want %v", got, ids[2:6])
	}
	// The reads of finished rows plan on the index.
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"throughput": {stmt.throughput, []any{old, 60e6, ""}},
		"finished":   {finishedSince, []any{old, 0, 10}},
		"cleanup":    {stmt.cleanup, []any{old, 1, 1, 1, 10}},
	} {
		plan := explainPlan(t, be, q.sql, q.args...)
		if !strings.Contains(plan, "spool_jobs_finished") {
			t.Errorf("%s does not plan on spool_jobs_finished:\n%s", name, plan)
		}
	}
	since, err := be.JobFinishedSince(ctx, &backend.JobFinishedSinceParams{Since: time.UnixMicro(old - 1)})
	if err != nil || len(since) != 4 {
		t.Fatalf("finished since: %d jobs, %v; want 4", len(since), err)
	}
	got := claimInOrder(t, be, jobs, ids, append([]int64{ids[8], ids[9]}, ids[12:]...))
	// A kept completion enters the index; a retry of a finished job leaves it.
	fin, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: got[0].Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(fin.Rejected) != 0 {
		t.Fatalf("finish: %+v, %v", fin, err)
	}
	if _, err := be.JobRetry(ctx, &backend.JobRetryParams{ID: ids[4]}); err != nil {
		t.Fatal(err)
	}
	wantFinished := []int64{ids[2], ids[3], ids[5], got[0].ID}
	slices.Sort(wantFinished)
	if got := finished(); !slices.Equal(got, wantFinished) {
		t.Fatalf("finished index holds %v, want %v", got, wantFinished)
	}
	// Retention deletes the finished rows older than half an hour: the three
	// finished an hour ago, not the one completed now.
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: 30 * time.Minute, DiscardedAge: 30 * time.Minute, CancelledAge: 30 * time.Minute})
	if err != nil || n != 3 {
		t.Fatalf("cleanup deleted %d, %v; want 3", n, err)
	}
	if f := finished(); !slices.Equal(f, []int64{got[0].ID}) {
		t.Fatalf("finished index after cleanup holds %v, want [%d]", f, got[0].ID)
	}
	var total int
	if err := be.st.readers.QueryRowContext(ctx, `SELECT count(*) FROM spool_jobs`).Scan(&total); err != nil || total != 13 {
		t.Fatalf("%d jobs left, %v; want 13", total, err)
	}
}

// explainPlan is the plan SQLite chooses for q with args.
func explainPlan(t *testing.T, be *Backend, q string, args ...any) string {
	t.Helper()
	rows, err := be.st.readers.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
