package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// strandArgs is a job of TestFloorsStrandNoJob.
type strandArgs struct {
	Seq int `json:"seq"`
}

func (strandArgs) Kind() string { return "strand" }

// TestFloorsStrandNoJob runs two clients, each with its own backend and so
// its own claim floors, on one queue while four inserters insert in
// transactions that stay open a few milliseconds (their jobs' run_at is the
// transaction's start, so claims often pass a key before its job commits).
// Probes are an hour apart and polls use the floors too, so a job a floor
// skipped without lowering would never run: every job must run, promptly.
// With one priority and no failures, the notifications' keys alone bring
// the late jobs back (without them 131 and 154 of 3,000 never ran in two tries); the mixed run
// adds three priorities and a failed first attempt for every seventh job.
func TestFloorsStrandNoJob(t *testing.T) {
	t.Run("one priority", func(t *testing.T) { testFloorsStrandNoJob(t, false) })
	t.Run("priorities and retries", func(t *testing.T) { testFloorsStrandNoJob(t, true) })
}

func testFloorsStrandNoJob(t *testing.T, mixed bool) {
	const jobs = 3000
	b1, pool := scratchBackend(t)
	b2, err := New(pool, &Options{Schema: b1.schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	var (
		mu        sync.Mutex
		committed = make([]time.Time, jobs)
		started   = make([]time.Time, jobs)
		finished  atomic.Int64
		failedAt  = make([]time.Time, jobs) // end of a failed first attempt
		retried   = make([]time.Time, jobs) // start of the attempt after it
	)
	allDone := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[strandArgs]) error {
		now := time.Now()
		seq := j.Args.Seq
		mu.Lock()
		defer mu.Unlock()
		if j.Attempt > 1 {
			if retried[seq].IsZero() {
				retried[seq] = now
			}
		} else if started[seq].IsZero() {
			started[seq] = now
		}
		if mixed && seq%7 == 0 && j.Attempt == 1 {
			failedAt[seq] = time.Now()
			return errors.New("first attempt fails")
		}
		if finished.Add(1) == jobs {
			close(allDone)
		}
		return nil
	}))
	var clients []*spool.Client
	for _, be := range []*Backend{b1, b2} {
		be.floors.probeEvery = time.Hour
		c, err := spool.NewClient(be, &spool.Config{
			Workers:      ws,
			Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 20, Prefetch: 20}},
			PollInterval: 200 * time.Millisecond,
			RetryPolicy:  spool.ConstantRetryPolicy{Delay: 0},
			Logger:       quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	t.Cleanup(func() {
		for _, c := range clients {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.Stop(stopCtx)
			cancel()
		}
	})

	inserter, err := spool.NewClient(b1, &spool.Config{Workers: ws, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Four inserters at once, so that a transaction begun earlier (its jobs'
	// run_at) often commits after one begun later, whose jobs claims may
	// already have taken.
	priority := func(rng *rand.Rand) int {
		if mixed {
			return rng.IntN(3)
		}
		return 0
	}
	const inserters = 4
	var wg sync.WaitGroup
	errs := make(chan error, inserters)
	for w := range inserters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, uint64(w)))
			for seq := w; seq < jobs; {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				var seqs []int
				for n := 1 + rng.IntN(3); n > 0 && seq < jobs; n-- {
					if _, err := inserter.InsertTx(ctx, tx, strandArgs{Seq: seq}, &spool.InsertOpts{Priority: priority(rng)}); err != nil {
						_ = tx.Rollback(ctx)
						errs <- err
						return
					}
					seqs = append(seqs, seq)
					seq += inserters
				}
				time.Sleep(time.Duration(rng.IntN(6)) * time.Millisecond) // the transaction stays open
				if err := tx.Commit(ctx); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				mu.Lock()
				for _, i := range seqs {
					committed[i] = now
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	select {
	case <-allDone:
	case <-time.After(30 * time.Second):
		mu.Lock()
		var missing []int
		for i := range jobs {
			if started[i].IsZero() {
				missing = append(missing, i)
			}
		}
		mu.Unlock()
		t.Fatalf("%d of %d jobs finished after 30 s; never started: %v", finished.Load(), jobs, missing)
	}

	mu.Lock()
	defer mu.Unlock()
	var worstPickup, worstRetry time.Duration
	for i := range jobs {
		worstPickup = max(worstPickup, started[i].Sub(committed[i]))
		if !failedAt[i].IsZero() {
			worstRetry = max(worstRetry, retried[i].Sub(failedAt[i]))
		}
	}
	t.Logf("%d jobs over two clients: worst pickup %v, worst retry pickup %v", jobs, worstPickup, worstRetry)
	// A job a floor skipped waits until something lowers the floor (with no
	// probe, maybe never: the deadline above). Seconds, 25 polls apart, are
	// not a loaded machine's scheduling: they are a job left behind.
	if worstPickup > 5*time.Second || worstRetry > 5*time.Second {
		t.Fatalf("worst pickup %v, worst retry pickup %v: a job waited for something other than a claim", worstPickup, worstRetry)
	}
}
