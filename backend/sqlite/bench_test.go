package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// BenchmarkStepRecordMany writes batches of step records (one a job, of
// 100 running jobs, as a client's record batch holds while its handlers
// run steps): BENCHMARKS.md, "SQLite and MariaDB: a batch's step records
// in one statement".
func BenchmarkStepRecordMany(b *testing.B) {
	be := newBackend(b, nil)
	ctx := context.Background()
	const jobs = 100
	ins := make([]*backend.JobInsertParams, jobs)
	for i := range ins {
		ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 25}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		b.Fatal(err)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Hour, ClaimID: "b"})
	if err != nil || len(rows) != jobs {
		b.Fatalf("claim: %d %v", len(rows), err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		steps := make([]backend.StepRecordParams, len(rows))
		for k, r := range rows {
			steps[k] = backend.StepRecordParams{Lease: r.Lease(), Name: fmt.Sprintf("step-%d", i), Result: json.RawMessage(`{"ok":true}`)}
		}
		out, err := be.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: steps})
		if err != nil || len(out) != len(steps) || !out[0].Recorded {
			b.Fatalf("record: %v %v", out, err)
		}
	}
	b.ReportMetric(float64(b.N*jobs)/b.Elapsed().Seconds(), "records/s")
}
