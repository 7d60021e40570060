package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestUpgradeNarrowClaims migrates a database holding jobs in every phase
// from schema 11 to 12 (phase and flow_wait replace pending, the lease
// index goes) and checks that the jobs are claimed, rescued, kept unique,
// taken by flow key and cleaned up as before.
func TestUpgradeNarrowClaims(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := openBackend(t, testdb.NewMySQLDatabase(t), nil)
	if err := be.MigrateTo(ctx, 11); err != nil {
		t.Fatalf("migrate to 11: %v", err)
	}
	jobs := []*backend.JobInsertParams{
		{Queue: "q", Kind: "plain", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "keyed", Args: []byte(`{}`), MaxAttempts: 3, FlowKey: "k"},
		{Queue: "q", Kind: "unique", Args: []byte(`{}`), MaxAttempts: 3, UniqueKey: "u1", UniqueStates: backend.UniqueStatesRequired},
		{Queue: "q", Kind: "expired", Args: []byte(`{}`), MaxAttempts: 3},
		{Queue: "q", Kind: "done", Args: []byte(`{}`), MaxAttempts: 3},
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatalf("insert on schema 11: %v", err)
	}
	ids := res.IDs
	db, schema := be.DB(), "`"+be.Database()+"`"
	// A job whose lease ended (its worker died) and a job finished an hour
	// ago, written as version 11's statements wrote them.
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'running', attempt = 1, fence = 1,
  leased_until = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, leased_by = 'gone', attempted_at = UTC_TIMESTAMP(6) WHERE id = ?`, ids[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'completed', attempt = 1,
  finalized_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?`, ids[4]); err != nil {
		t.Fatal(err)
	}

	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate 11 to the latest: %v", err)
	}
	if v, err := be.SchemaVersion(ctx); err != nil || v.Current != v.Latest || v.Latest < 12 {
		t.Fatalf("schema version %+v, %v; want the latest", v, err)
	}
	var phases string
	if err := db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(phase ORDER BY id), GROUP_CONCAT(COALESCE(flow_wait, '-') ORDER BY id)
FROM `+schema+`.spool_jobs`).Scan(&phases, new(string)); err != nil || phases != "1,1,1,2,0" {
		t.Fatalf("phases after the upgrade: %q, %v; want 1,1,1,2,0", phases, err)
	}

	rescued, err := be.JobRescue(ctx, &backend.JobRescueParams{})
	if err != nil || rescued.Retried != 1 {
		t.Fatalf("rescue after the upgrade: %+v, %v; want the expired job retried", rescued, err)
	}
	dup, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "q", Kind: "unique", Args: []byte(`{}`), MaxAttempts: 3, UniqueKey: "u1", UniqueStates: backend.UniqueStatesRequired},
	}})
	if err != nil || len(dup.IDs) != 1 || dup.IDs[0] != ids[2] {
		t.Fatalf("unique insert after the upgrade: %+v, %v; want job %d reported", dup, err, ids[2])
	}
	var keys []string
	err = be.JobClaimFlow(ctx, &backend.JobClaimFlowParams{Queue: "q", Lease: time.Minute, ClaimID: "f"}, func(tx backend.FlowTx) error {
		var err error
		keys, err = tx.FlowKeys(ctx, "", 10)
		return err
	})
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("flow keys after the upgrade: %q, %v; want [k]", keys, err)
	}
	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: 10, Lease: time.Minute, ClaimID: "c"})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim after the upgrade: %d jobs, %v; want the 4 pending", len(claimed), err)
	}
	fs := make([]backend.JobFinish, len(claimed))
	for i, j := range claimed {
		fs[i] = backend.JobFinish{Lease: j.Lease(), Outcome: backend.OutcomeComplete}
	}
	if fr, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs}); err != nil || len(fr.Rejected) != 0 {
		t.Fatalf("finish after the upgrade: %+v, %v", fr, err)
	}
	n, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: 30 * time.Minute})
	if err != nil || n != 1 {
		t.Fatalf("cleanup after the upgrade: %d, %v; want the job finished an hour ago", n, err)
	}
}
