package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

func benchJobs(n int) []*backend.JobInsertParams {
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{}`), MaxAttempts: 25}
	}
	return jobs
}

// BenchmarkInsertMany compares the two insert paths side by side at several
// batch sizes: INSERT … unnest (returns ids) and COPY (no ids). The crossover
// sets Options.CopyThreshold. Reported per job.
func BenchmarkInsertMany(b *testing.B) {
	for _, size := range []int{10, 100, 500, 2000, 10000} {
		for _, path := range []string{"unnest", "copy"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, path), func(b *testing.B) {
				pool := testdb.PostgresPool(b)
				threshold := 1 << 30
				if path == "copy" {
					threshold = 1
				}
				schema := testdb.NewSchemaName()
				be, err := postgres.New(pool, &postgres.Options{Schema: schema, CopyThreshold: threshold})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if err := be.Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
				jobs := benchJobs(size)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// unnest returns ids; copy is the no-ids bulk path.
					if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs, NoIDs: path == "copy"}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkClaimFinish claims and completes batches in one session, keeping
// completed rows or deleting them: the cost of retention on the hot path.
func BenchmarkClaimFinish(b *testing.B) {
	for _, batch := range []int{100, 1000} {
		for _, del := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/delete=%v", batch, del), func(b *testing.B) {
				pool := testdb.PostgresPool(b)
				schema := testdb.NewSchemaName()
				be, _ := postgres.New(pool, &postgres.Options{Schema: schema})
				ctx := context.Background()
				if err := be.Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
				total := b.N * batch
				for left := total; left > 0; left -= 10000 {
					if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(min(left, 10000))}); err != nil {
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
						fs[k] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
					}
					res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
					if err != nil || len(res.Rejected) != 0 {
						b.Fatalf("finish: %v %v", res, err)
					}
				}
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkPickupLatency measures insert commit → handler start for single
// jobs inserted by another client (so the wake-up is the NOTIFY path, not
// the in-process one), one at a time, and reports percentiles.
func BenchmarkPickupLatency(b *testing.B) {
	for _, mode := range []string{"listen", "poll-only-10ms"} {
		b.Run(mode, func(b *testing.B) {
			be := newBackend(b)
			ctx := context.Background()
			started := make(chan time.Time, 1)
			ws := spool.NewWorkers()
			spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
				started <- time.Now()
				return nil
			}))
			cfg := &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 10}},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if mode != "listen" {
				cfg.PollOnly, cfg.PollInterval = true, 10*time.Millisecond
			}
			worker, err := spool.NewClient(be, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := worker.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer worker.Stop(ctx)
			inserter, _ := spool.NewClient(be, &spool.Config{})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := inserter.Insert(ctx, conformance.NoteArgs{N: i}, nil); err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				lat = append(lat, (<-started).Sub(committed))
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
