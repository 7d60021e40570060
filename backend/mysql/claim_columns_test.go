package mysql_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// TestClaimReturnsTheStoredJob checks that a claim returns each job as a
// read of the stored row after the claim does: a claim reads fewer
// columns than a read and fills the rest itself (claimColumns,
// collectClaimed, markClaimed). The job carries a value in every column a
// claim reads: tags, metadata, a unique key, a flow key, a priority, an
// error history and an output from an earlier attempt. Both strategies.
func TestClaimReturnsTheStoredJob(t *testing.T) {
	for _, strategy := range []string{mysql.StrategyPessimistic, mysql.StrategyOptimistic} {
		t.Run(string(strategy), func(t *testing.T) {
			be := newBackend(t, url.Values{"spool_claim": {string(strategy)}})
			ctx := context.Background()
			ins, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
				Queue: "cols", Kind: "columns", Args: json.RawMessage(`{"n":1}`), Priority: 3, MaxAttempts: 7,
				Tags: []string{"a", "b"}, Metadata: json.RawMessage(`{"m":"x"}`),
				UniqueKey: "k1", UniqueStates: backend.UniqueStatesRequired, FlowKey: "f1",
			}}})
			if err != nil {
				t.Fatal(err)
			}
			id := ins.IDs[0]
			claim := func(claimID string) *backend.JobRow {
				t.Helper()
				rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "cols", Max: 10, Lease: time.Minute, ClaimID: claimID})
				if err != nil || len(rows) != 1 || rows[0].ID != id {
					t.Fatalf("claim: %d rows, %v", len(rows), err)
				}
				return rows[0]
			}
			first := claim("c1")
			if ok, err := be.JobRecord(ctx, &backend.JobRecordParams{Lease: first.Lease(), Output: json.RawMessage(`{"out":2}`)}); err != nil || !ok {
				t.Fatalf("record: %v %v", ok, err)
			}
			res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{
				Lease: first.Lease(), Outcome: backend.OutcomeRetry,
				Error: &backend.AttemptError{Attempt: 1, Error: "first failed", Trace: "trace"},
			}}})
			if err != nil || len(res.Rejected) != 0 {
				t.Fatalf("retry: %v %v", res, err)
			}
			got := claim("c2")
			want, err := be.JobGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Errors) != 1 || want.Output == nil || want.UniqueKey == "" || want.FlowKey == "" || want.Attempt != 2 {
				t.Fatalf("stored job lacks a value the test needs: %+v", want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("claimed row differs from the stored one:\nclaimed %+v\nstored  %+v", got, want)
			}
		})
	}
}
