package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
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

// BenchmarkFinishWithSteps completes batches of 100 claimed jobs, each
// carrying 0 or 5 step records (backend.OutcomeStepWriter), as a drain of
// step jobs does; cpu-µs/job is this process's CPU (SQLite runs in it)
// over the finishes only.
func BenchmarkFinishWithSteps(b *testing.B) {
	for _, steps := range []int{0, 5} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
			be := newBackend(b, nil)
			ctx := context.Background()
			const jobs = 100
			ins := make([]*backend.JobInsertParams, jobs)
			for i := range ins {
				ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{"steps":5}`), MaxAttempts: 25}
			}
			names := make([]string, steps)
			for i := range names {
				names[i] = fmt.Sprintf("step-%d", i+1)
			}
			var cpu time.Duration
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
					b.Fatal(err)
				}
				rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Hour, ClaimID: "b"})
				if err != nil || len(rows) != jobs {
					b.Fatalf("claim: %d %v", len(rows), err)
				}
				fs := make([]backend.JobFinish, len(rows))
				for k, r := range rows {
					fs[k] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
					for s, name := range names {
						fs[k].Steps = append(fs[k].Steps, backend.StepRecordParams{Lease: r.Lease(), Name: name, Result: json.RawMessage(strconv.Itoa(s))})
					}
				}
				c0 := processCPU()
				b.StartTimer()
				res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
				b.StopTimer()
				cpu += processCPU() - c0
				if err != nil || len(res.Rejected) != 0 {
					b.Fatalf("finish: %v %v", res, err)
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*jobs), "cpu-µs/job")
		})
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaimFinish claims and completes batches of 1,500 jobs (a
// drain's claim size) with JobClaim and JobFinishMany alone, keeping and
// deleting completed rows; cpu-µs/job is this process's CPU (SQLite runs
// in it) over the claims and finishes, claim-µs/job that of the claims.
func BenchmarkClaimFinish(b *testing.B) {
	for _, del := range []bool{false, true} {
		b.Run(fmt.Sprintf("delete=%v", del), func(b *testing.B) {
			be := newBackend(b, nil)
			ctx := context.Background()
			const jobs = 1500
			ins := make([]*backend.JobInsertParams, jobs)
			for i := range ins {
				ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{"n":1}`), MaxAttempts: 25}
			}
			var cpu, claimCPU time.Duration
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
					b.Fatal(err)
				}
				c0 := processCPU()
				b.StartTimer()
				rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Hour, ClaimID: "b"})
				c1 := processCPU()
				if err != nil || len(rows) != jobs {
					b.Fatalf("claim: %d %v", len(rows), err)
				}
				fs := make([]backend.JobFinish, len(rows))
				for k, r := range rows {
					fs[k] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
				}
				res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
				b.StopTimer()
				c2 := processCPU()
				cpu += c2 - c0
				claimCPU += c1 - c0
				if err != nil || len(res.Rejected) != 0 {
					b.Fatalf("finish: %v %v", res, err)
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*jobs), "cpu-µs/job")
			b.ReportMetric(float64(claimCPU.Microseconds())/float64(b.N*jobs), "claim-µs/job")
		})
	}
}
