package mysql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// BenchmarkFinish claims batches and writes one outcome for the whole batch:
// completions take the id-list UPDATE, failures (retry with an error) the
// CASE-per-id UPDATE that also appends to the error history, with one error
// text for the batch (jobs that hit the same outage) or a distinct one each.
func BenchmarkFinish(b *testing.B) {
	cases := []struct {
		name     string
		outcome  backend.Outcome
		distinct bool
	}{{"complete", backend.OutcomeComplete, false}, {"retry-same-error", backend.OutcomeRetry, false}, {"retry-distinct-errors", backend.OutcomeRetry, true}}
	for _, batch := range []int{100, 1000} {
		for _, c := range cases {
			outcome := c.outcome
			b.Run(fmt.Sprintf("batch=%d/%s", batch, c.name), func(b *testing.B) {
				be := newBackend(b, nil)
				ctx := context.Background()
				total := b.N * batch
				for left := total; left > 0; left -= 5000 {
					jobs := make([]*backend.JobInsertParams, min(left, 5000))
					for i := range jobs {
						jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 25}
					}
					if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: batch, Lease: time.Minute, ClaimID: "b"})
					if err != nil || len(rows) != batch {
						b.Fatalf("claim: %d %v", len(rows), err)
					}
					fs := make([]backend.JobFinish, len(rows))
					for k, r := range rows {
						fs[k] = backend.JobFinish{Lease: r.Lease(), Outcome: outcome}
						if outcome == backend.OutcomeRetry {
							fs[k].Delay = time.Hour + time.Duration(k)*time.Millisecond
							msg := "handler failed"
							if c.distinct {
								msg = fmt.Sprintf("handler failed on item %d", r.ID)
							}
							fs[k].Error = &backend.AttemptError{Attempt: int(r.Attempt), Error: msg, Trace: "goroutine 1 [running]"}
						}
					}
					res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
					if err != nil || len(res.Rejected) != 0 {
						b.Fatalf("finish: %v %v", res, err)
					}
				}
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

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
