package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// drainBenchArgs is the no-op job of BenchDrain, as bench drain's.
type drainBenchArgs struct{}

func (drainBenchArgs) Kind() string { return "spool_bench_noop" }

// drainBenchJobs is how many jobs each drain of benchDrain works.
const drainBenchJobs = 20000

// BenchDrain drains 20,000 no-op jobs through a client on each store
// newStore opens, one per iteration, with bench drain's settings (100
// workers, prefetch 3,000, outcome batches of 2,000), in two sub-benchmarks:
// keeping completed jobs ("delete=false") and deleting them
// ("delete=true"). It measures the runtime around the store's calls
// (producer, job goroutines, handlers, contexts, the running set, outcome
// batches) with the store's own work, and reports cpu-µs/job, this
// process's CPU (Linux) from Start until the client's stop has written
// every outcome, and allocs/job and B/job, the heap allocations of the same
// span.
func BenchDrain(b *testing.B, newStore func(*testing.B) backend.Backend) {
	for _, del := range []bool{false, true} {
		b.Run(fmt.Sprintf("delete=%v", del), func(b *testing.B) { benchDrain(b, newStore, del) })
	}
}

// benchDrain is one of BenchDrain's sub-benchmarks.
func benchDrain(b *testing.B, newStore func(*testing.B) backend.Backend, deleteCompleted bool) {
	ctx := context.Background()
	var (
		cpu            time.Duration
		allocs, nbytes uint64
	)
	b.StopTimer()
	for range b.N {
		be := newStore(b)
		var handled atomic.Int64
		done := make(chan struct{})
		ws := spool.NewWorkers()
		spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[drainBenchArgs]) error {
			if handled.Add(1) == drainBenchJobs {
				close(done)
			}
			return nil
		}))
		retention := time.Duration(0)
		if deleteCompleted {
			retention = -1
		}
		client, err := spool.NewClient(be, &spool.Config{
			Workers:            ws,
			Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 100, Prefetch: 3000}},
			CompletionBatchMax: 2000,
			CompletedRetention: retention,
			Logger:             slog.New(slog.DiscardHandler),
		})
		if err != nil {
			b.Fatal(err)
		}
		params := make([]spool.InsertManyParams, 10000)
		for i := range params {
			params[i] = spool.InsertManyParams{Args: drainBenchArgs{}}
		}
		for n := 0; n < drainBenchJobs; n += len(params) {
			if _, err := client.InsertMany(ctx, params[:min(len(params), drainBenchJobs-n)]); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c0 := processCPU()
		b.StartTimer()
		if err := client.Start(ctx); err != nil {
			b.Fatal(err)
		}
		<-done
		// A soft stop returns once every outcome is written.
		if err := client.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - c0
		runtime.ReadMemStats(&m1)
		allocs += m1.Mallocs - m0.Mallocs
		nbytes += m1.TotalAlloc - m0.TotalAlloc
		stats, err := client.QueueStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		want := map[backend.State]int64{backend.StateCompleted: drainBenchJobs}
		if deleteCompleted {
			want = map[backend.State]int64{}
		}
		for _, st := range stats {
			for state, n := range st.Counts {
				if n != want[state] {
					b.Fatalf("queue %s holds %d jobs %s after the drain, want %d", st.Queue, n, state, want[state])
				}
			}
		}
	}
	jobs := float64(b.N * drainBenchJobs)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/jobs, "cpu-µs/job")
	b.ReportMetric(float64(allocs)/jobs, "allocs/job")
	b.ReportMetric(float64(nbytes)/jobs, "B/job")
}
