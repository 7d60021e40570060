package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// slowHeartbeats makes the server take delay over every heartbeat of the
// backend's schema, and nothing else: a statement trigger sleeps when the
// statement sets leased_until as a heartbeat does (claims set it among
// other columns, rescue and finishes clear it). The sleep comes before any
// row is locked, so two beats out at once wait side by side, as two
// statements on a CPU-starved server do.
func slowHeartbeats(t *testing.T, ctx context.Context, schema string, delay time.Duration) {
	t.Helper()
	pool := testdb.PostgresPool(t)
	ddl := fmt.Sprintf(`
CREATE FUNCTION %[1]s.slow_beat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_query() ~* 'SET leased_until = (greatest|now)' THEN
    PERFORM pg_sleep(%[2]f);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow_beat BEFORE UPDATE ON %[1]s.spool_jobs FOR EACH STATEMENT EXECUTE FUNCTION %[1]s.slow_beat();
CREATE TRIGGER slow_beat BEFORE UPDATE ON %[1]s.spool_leases FOR EACH STATEMENT EXECUTE FUNCTION %[1]s.slow_beat();`,
		schema, delay.Seconds())
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("slow the heartbeats down: %v", err)
	}
}

// TestSlowServerKeepsLeases: on a server that takes more than half the
// lease to answer each heartbeat, but answers, a job that runs for three
// leases keeps its lease and runs once. Beats sent one after another (each
// waiting for the last to land) fall behind such a server: each lands
// after the lease the one before gave had ended, rescue hands the job to
// another worker, and it runs twice at once.
//
// The jobs are claimed in place, whose heartbeat locks its rows after the
// trigger's sleep, so two beats out at once wait side by side. A beat of
// jobs in lease rows locks them first: beats sent while one is out queue
// behind it, and on such a server the lease ends (the handler is then
// cancelled, TestLeaseEndCancelsHandler in the root package).
func TestSlowServerKeepsLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newBackend(t).Schema()
	be, err := postgres.New(testdb.PostgresPool(t), &postgres.Options{Schema: schema, Claims: postgres.ClaimsInPlace})
	if err != nil {
		t.Fatal(err)
	}
	// The beats tolerate a latency under two thirds of the lease; the
	// delay leaves an eighth of it (0.47 s) for what a loaded machine adds
	// to the sleep (a CI run added more than 0.23 s to a 1.1-s sleep, which
	// a 2-s lease did not leave room for).
	const (
		lease = 4 * time.Second
		delay = lease * 55 / 100 // between half and two thirds of the lease
		jobs  = 2
	)
	slowHeartbeats(t, ctx, schema, delay)

	var (
		mu       sync.Mutex
		starts   = map[int]int{}
		running  = map[int]bool{}
		overlaps []string
		done     = make(chan struct{}, jobs)
	)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[conformance.NoteArgs]) error {
		mu.Lock()
		starts[j.Args.N]++
		if running[j.Args.N] {
			overlaps = append(overlaps, fmt.Sprintf("job %d started again (attempt %d) while its first run ran", j.ID, j.Attempt))
		}
		running[j.Args.N] = true
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[j.Args.N] = false
			mu.Unlock()
		}()
		select {
		case <-time.After(3 * lease):
			select {
			case done <- struct{}{}:
			default: // a run past the jobs' count: the starts say so
			}
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	var logs conformance.LogBuffer
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, LeaseDuration: lease, PollInterval: 50 * time.Millisecond,
		RescueInterval: 50 * time.Millisecond, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	conformance.InsertNotes(t, c, 0, jobs)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
	}()
	for i := 0; i < jobs; i++ {
		select {
		case <-done:
		case <-time.After(8 * lease):
			mu.Lock()
			msg := fmt.Sprintf("%d of %d jobs ran to their end; starts %v, overlaps %v", i, jobs, starts, overlaps)
			mu.Unlock()
			t.Fatalf("%s; warnings:\n%s", msg, logs.String())
		}
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("%v; warnings:\n%s", overlaps, logs.String())
	}
	for n, k := range starts {
		if k != 1 {
			t.Errorf("job %d started %d times; warnings:\n%s", n, k, logs.String())
		}
	}
	rows, err := be.JobList(ctx, &backend.JobListParams{Limit: jobs})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range rows {
		if j.State != backend.StateCompleted || j.Attempt != 1 || len(j.Errors) != 0 {
			t.Errorf("job %d: %s at attempt %d, errors %+v", j.ID, j.State, j.Attempt, j.Errors)
		}
	}
}
