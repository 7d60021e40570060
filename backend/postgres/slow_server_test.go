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

// slowHeartbeats makes the server answer each heartbeat of the backend's
// schema only once the next beat has been sent: a server slower than the
// time between beats, however fast or slow the machine. A statement
// trigger takes a number for each statement that sets leased_until as a
// heartbeat does (claims set it among other columns, rescue and finishes
// clear it) and waits until a later number has been taken (a sequence,
// seen by every session at once). The wait comes before any row is
// locked, so the two beats out at once wait side by side, as two
// statements on a CPU-starved server do. Only spool_jobs has the trigger:
// the test's jobs are claimed in place, so every beat updates it, once.
//
// It returns the number of beats taken so far, and open, which lets every
// beat through from then on; open is also called when the test ends, so
// that no beat is left waiting on the server (it would hold the schema's
// tables).
func slowHeartbeats(t *testing.T, ctx context.Context, schema string) (beats func() int64, open func()) {
	t.Helper()
	pool := testdb.PostgresPool(t)
	ddl := fmt.Sprintf(`
CREATE SEQUENCE %[1]s.slow_beats;
CREATE SEQUENCE %[1]s.slow_open;
CREATE FUNCTION %[1]s.slow_beat() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  n bigint;
BEGIN
  IF current_query() ~* 'SET leased_until = (greatest|now)' THEN
    n := nextval('%[1]s.slow_beats');
    WHILE (SELECT last_value FROM %[1]s.slow_beats) <= n AND NOT (SELECT is_called FROM %[1]s.slow_open) LOOP
      PERFORM pg_sleep(0.005);
    END LOOP;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow_beat BEFORE UPDATE ON %[1]s.spool_jobs FOR EACH STATEMENT EXECUTE FUNCTION %[1]s.slow_beat();`,
		schema)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("slow the heartbeats down: %v", err)
	}
	open = func() {
		if _, err := pool.Exec(context.Background(), fmt.Sprintf(`SELECT nextval('%s.slow_open')`, schema)); err != nil {
			t.Errorf("let the heartbeats through: %v", err)
		}
	}
	t.Cleanup(open)
	beats = func() int64 {
		var n int64
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s.slow_beats`, schema)).Scan(&n); err != nil {
			t.Fatalf("count the heartbeats: %v", err)
		}
		return n
	}
	return beats, open
}

// TestSlowServerKeepsLeases: on a server that answers each heartbeat only
// once the next has been sent, but answers, a job that runs for three
// leases keeps its lease and runs once. Beats sent one after another (each
// waiting for the last to land) fall behind such a server: the first is
// never answered, the lease ends, and rescue hands the job to another
// worker: it starts again (a client with one beat out at a time started
// each job three times in three leases).
//
// A beat sent every third of the lease and answered when the next is sent
// lands a third of the lease after its send, and the lease it extends
// runs from that send: each lease ends two beats after the beat that gave
// it, a third of the lease of margin for what a loaded machine adds to the
// beats' ticks, whatever the server's or the machine's speed.
//
// The jobs are claimed in place, whose heartbeat locks its rows after the
// trigger's wait, so two beats out at once wait side by side. A beat of
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
	const (
		lease = 4 * time.Second
		jobs  = 2
	)
	beats, open := slowHeartbeats(t, ctx, schema)

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
	// Held until the next beat: the beats of three leases, every third of
	// one, less the last, which open lets through.
	held := beats()
	open()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if held < 3 {
		t.Errorf("%d heartbeats held by the server over three leases: the test did not slow them down", held)
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
