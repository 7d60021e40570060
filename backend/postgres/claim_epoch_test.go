package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

// TestClaimLostInCrash: a claim commits without waiting for its WAL flush,
// so a crash can lose it while its handler runs. The job's next claim then
// gets a fence of a new epoch, so the lost claim's holder cannot finish
// the job under the new claim's lease; the new holder can. With
// ClaimCommitSync the claim survives the crash instead.
func TestClaimLostInCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters, err := dbserver.StartClusters(ctx, 1, "spool-claim-crash-", dbserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusters.Stop() })
	srv := clusters.Servers[0]
	// The WAL writer then leaves an asynchronous commit unflushed for 10 s:
	// a crash right after the claim loses it.
	admin, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ALTER SYSTEM SET wal_writer_delay = '10s'", "ALTER SYSTEM SET wal_writer_flush_after = '1GB'", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()
	open := func(commit string) (*postgres.Backend, func()) {
		pool, err := pgxpool.New(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		be, err := postgres.New(pool, &postgres.Options{Schema: "spool", ClaimCommit: commit})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return be, func() { _ = be.Close(); pool.Close() }
	}
	crash := func() {
		t.Helper()
		if err := srv.Stop(); err != nil { // SIGQUIT: an immediate shutdown, recovered as a crash
			t.Fatal(err)
		}
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	claimOne := func(be *postgres.Backend, queue string) *backend.JobRow {
		t.Helper()
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, Max: 1, Lease: time.Hour, ClaimID: "t"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %v", rows, err)
		}
		return rows[0]
	}
	insertOne := func(be *postgres.Backend, queue string) int64 {
		t.Helper()
		res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.IDs[0]
	}

	be, closeBE := open(postgres.ClaimCommitAsync)
	id := insertOne(be, "async")
	lost := claimOne(be, "async")
	closeBE()
	crash()
	be, closeBE = open(postgres.ClaimCommitAsync)
	defer closeBE()
	if j, err := be.JobGet(ctx, id); err != nil || j.State != backend.StateAvailable {
		t.Fatalf("after the crash the job is %+v (%v): the claim was not lost, so the test shows nothing", j, err)
	}
	again := claimOne(be, "async")
	if again.Fence <= lost.Fence {
		t.Fatalf("the claim after the crash has fence %d, the lost one had %d: the lost claim's holder could finish under it", again.Fence, lost.Fence)
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: lost.Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(res.Rejected) != 1 {
		t.Fatalf("the lost claim's completion: %+v %v, want rejected", res, err)
	}
	res, err = be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: again.Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("the new claim's completion: %+v %v", res, err)
	}
	// Within the new epoch fences go on one at a time.
	id2 := insertOne(be, "async")
	first := claimOne(be, "async")
	if first.ID != id2 || first.Fence != again.Fence {
		t.Fatalf("a new job's first claim in the epoch: fence %d, want %d (the epoch's first)", first.Fence, again.Fence)
	}

	syncBE, closeSync := open(postgres.ClaimCommitSync)
	id3 := insertOne(syncBE, "sync")
	kept := claimOne(syncBE, "sync")
	closeSync()
	crash()
	syncBE, closeSync = open(postgres.ClaimCommitSync)
	defer closeSync()
	if j, err := syncBE.JobGet(ctx, id3); err != nil || j.State != backend.StateRunning || j.Fence != kept.Fence {
		t.Fatalf("a synchronous claim after the crash: %+v (%v), want running under fence %d", j, err, kept.Fence)
	}
}
