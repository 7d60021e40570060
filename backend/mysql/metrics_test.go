package mysql_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestCallMetrics checks that Metrics counts claim calls and finish calls,
// each with its time, and nothing else as either.
func TestCallMetrics(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{Queue: "m", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if m := be.Metrics(); m.Claims != 0 || m.Finishes != 0 || m.ClaimTime != 0 || m.FinishTime != 0 {
		t.Fatalf("before any claim: %+v", m)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "m", Max: 5, Lease: time.Minute, ClaimID: "c"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if _, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "m", Max: 5, Lease: time.Minute, ClaimID: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: rows[0].Lease(), Outcome: backend.OutcomeComplete}}}); err != nil {
		t.Fatal(err)
	}
	m := be.Metrics()
	if m.Claims != 2 || m.Finishes != 1 || m.ClaimTime <= 0 || m.FinishTime <= 0 {
		t.Fatalf("after two claims and one finish: %+v", m)
	}
}
