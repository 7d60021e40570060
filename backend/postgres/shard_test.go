package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// startClusters starts n PostgreSQL clusters of the test's own, stopped
// when the test ends, and returns their URLs.
func startClusters(t *testing.T, n int) []string {
	t.Helper()
	c, err := dbserver.StartClusters(context.Background(), n, "spool-shard-test-", dbserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c.URLs()
}

// shardHarness makes, per test, a sharded backend over a migrated schema
// of the test's own on each cluster, kept between the process's tests
// (keptBackendsAt).
func shardHarness(urls []string, opts *shard.Options) conformance.Harness {
	open := func(t *testing.T, shards []backend.Backend) *shard.Backend {
		be, err := shard.New(shards, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	return conformance.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			return open(t, keptBackendsAt(t, urls))
		},
		NewUnmigrated: func(t *testing.T) backend.Backend {
			shards := make([]backend.Backend, len(urls))
			for i, u := range urls {
				pool := testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement)
				shards[i] = newUnmigratedOn(t, pool, &postgres.Options{Schema: unmigratedSchema(t, pool)})
			}
			return open(t, shards)
		},
		Reopen: func(t *testing.T, be backend.Backend) backend.Backend {
			sb := be.(*shard.Backend)
			shards := make([]backend.Backend, len(urls))
			for i, u := range urls {
				other, err := postgres.New(testdb.PostgresPoolAt(t, u, pgx.QueryExecModeCacheStatement),
					&postgres.Options{Schema: sb.Shard(i).(*postgres.Backend).Schema()})
				if err != nil {
					t.Fatal(err)
				}
				shards[i] = other
			}
			return open(t, shards)
		},
		HoldClaims: func(be backend.Backend, gate *conformance.ClaimGate) backend.Backend {
			return heldShardClaims{be.(*shard.Backend), gate}
		},
		BeginTx: func(t *testing.T, be backend.Backend) conformance.Tx {
			sb := be.(*shard.Backend)
			tx := shard.NewLazyTx(func(ctx context.Context, s int) (backend.Tx, error) {
				return sb.Shard(s).(*postgres.Backend).Pool().Begin(ctx)
			})
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		},
	}
}

// TestSharded runs, over three PostgreSQL clusters of the test's own, the
// conformance suite with queues spread by key, and a drain in which every
// job writes its effect in its completing transaction on its own shard.
//
// Placement by queue is not run here: it puts each queue, and so each
// conformance test's jobs, on one shard, which backend/shard's
// TestConformanceByQueue covers over memory stores; what PostgreSQL adds
// under the sharded store (a transaction per shard, each shard's clock and
// notifications, a queue's jobs on several servers) placement by key runs,
// and each conformance run here takes three schemas per test.
func TestSharded(t *testing.T) {
	t.Parallel() // beside the conformance modes (TestConformance)
	urls := startClusters(t, 3)
	t.Run("ConformanceByKey", func(t *testing.T) {
		h := shardHarness(urls, &shard.Options{Placement: shard.ByKey})
		h.Spread = &conformance.Spread{
			StoreOf:  func(_ backend.Backend, id int64) int { return shard.JobShard(id) },
			KeyStore: func(be backend.Backend, key string) int { return be.(*shard.Backend).KeyShard(key) },
			PerStore: shard.ConformancePerShardByKey,
		}
		conformance.Run(t, h)
	})
	t.Run("EffectsOnce", func(t *testing.T) { testShardedEffectsOnce(t, urls) })
}

type effectArgs struct {
	N int `json:"n"`
}

func (effectArgs) Kind() string { return "effect" }

// testShardedEffectsOnce: two clients drain 3,000 jobs spread over the
// shards; each job inserts its effect and completes in one transaction on
// its shard (shard.Tx). Every job completes, on the shard its id names, and
// every effect is there once, on that shard.
func testShardedEffectsOnce(t *testing.T, urls []string) {
	t.Parallel()
	ctx := context.Background()
	h := shardHarness(urls, &shard.Options{Placement: shard.ByKey})
	be := h.NewBackend(t).(*shard.Backend)
	pools := make([]*pgxpool.Pool, len(urls))
	for i := range urls {
		pools[i] = be.Shard(i).(*postgres.Backend).Pool()
		if _, err := pools[i].Exec(ctx, "CREATE TABLE IF NOT EXISTS shard_effects (job_id bigint NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = pools[i].Exec(context.Background(), "DROP TABLE shard_effects") })
	}
	const total = 3000
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[effectArgs]) error {
		s := shard.JobShard(j.ID)
		tx, err := pools[s].Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, "INSERT INTO shard_effects (job_id) VALUES ($1)", j.ID); err != nil {
			return err
		}
		if err := spool.CompleteTx(ctx, shard.Tx{Shard: s, Tx: tx}, j); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
	var clients []*spool.Client
	for _, b := range []backend.Backend{be, h.Reopen(t, be)} {
		c, err := spool.NewClient(b, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 20}},
			PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	params := make([]spool.InsertManyParams, total)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: effectArgs{N: i}}
	}
	if _, err := clients[0].InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		stats, err := be.QueueStatsAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) == 1 && stats[0].Counts[backend.StateCompleted] == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained in 60 s: %+v", stats)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := 0
	for s, pool := range pools {
		var n, distinct, strays int
		err := pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job_id), count(*) FILTER (WHERE job_id % 256 <> $1) FROM shard_effects", s).
			Scan(&n, &distinct, &strays)
		if err != nil {
			t.Fatal(err)
		}
		if n != distinct || strays != 0 {
			t.Errorf("shard %d: %d effects of %d jobs, %d of jobs of other shards", s, n, distinct, strays)
		}
		if n < total/len(pools)/2 {
			t.Errorf("shard %d ran %d of %d jobs: the spread is uneven", s, n, total)
		}
		seen += n
	}
	if seen != total {
		t.Errorf("%d effects for %d jobs", seen, total)
	}
}

// TestShardDown: with one of three shards' servers stopped in the middle
// of a drain, the other two shards' jobs all complete while it is down (a
// claim passes over the unreachable shard, outcomes for the others are
// written without waiting for it, wake-ups keep coming from them); once it
// is back, its jobs complete too, and no job is lost.
func TestShardDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusters, err := dbserver.StartClusters(ctx, 3, "spool-shard-down-", dbserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := clusters.Stop(); err != nil {
			t.Error(err)
		}
	})
	h := shardHarness(clusters.URLs(), &shard.Options{Placement: shard.ByKey})
	be := h.NewBackend(t).(*shard.Backend)
	const total = 3000
	var started sync.Map
	var mu sync.Mutex
	doneOn := make([]int, 3)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[effectArgs]) error {
		started.Store(j.ID, true)
		time.Sleep(100 * time.Millisecond) // 30 workers: about 300 jobs a second
		mu.Lock()
		doneOn[shard.JobShard(j.ID)]++
		mu.Unlock()
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 30}},
		LeaseDuration: 3 * time.Second, RescueInterval: 500 * time.Millisecond, PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]spool.InsertManyParams, total)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: effectArgs{N: i}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	ran := func(s int) int {
		mu.Lock()
		defer mu.Unlock()
		return doneOn[s]
	}
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s (handlers finished per shard: %d %d %d)", what, d, ran(0), ran(1), ran(2))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("a first part of the drain", 30*time.Second, func() bool { return ran(0)+ran(1)+ran(2) >= 100 })
	stopAt := time.Now()
	t.Logf("stopping shard 1 with %d %d %d done", ran(0), ran(1), ran(2))
	if err := clusters.Servers[1].Stop(); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	t.Logf("shard 1 down after %s, with %d %d %d done", downAt.Sub(stopAt).Round(time.Millisecond), ran(0), ran(1), ran(2))
	if ran(0) > total/3/2 || ran(2) > total/3/2 {
		t.Fatalf("shards 0 and 2 were half done (%d, %d) before shard 1 went down: the test needs them busy", ran(0), ran(2))
	}
	// Shards 0 and 2 hold 1,000 jobs each; every one of them is done, and
	// its outcome written, while shard 1 is down.
	completedOn := func(s int) int64 {
		stats, err := be.Shard(s).QueueStatsAll(ctx)
		if err != nil || len(stats) == 0 {
			return -1
		}
		return stats[0].Counts[backend.StateCompleted]
	}
	waitFor("shards 0 and 2 drained while shard 1 is down", 30*time.Second, func() bool {
		return completedOn(0) == total/3 && completedOn(2) == total/3
	})
	t.Logf("shards 0 and 2 drained %s after shard 1 went down", time.Since(downAt).Round(time.Millisecond))
	if err := clusters.Servers[1].Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("shard 1 drained once it is back", 60*time.Second, func() bool { return completedOn(1) == total/3 })
	n := 0
	started.Range(func(any, any) bool { n++; return true })
	if n != total {
		t.Fatalf("%d jobs started, want %d", n, total)
	}
}

type shardTickArgs struct{}

func (shardTickArgs) Kind() string { return "shard-tick" }

// TestShardZeroDown: with shard 0 cut off (three schemas of the test
// server, shard 0's reached through a proxy that the test cuts) and the
// leading client stopped, the other client takes the lead without shard 0:
// it rescues a dead worker's job on each of shards 1 and 2, and fires a
// periodic job (placed on shard 2) at every slot, exactly once per slot,
// the slots its predecessor fired included.
func TestShardZeroDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxy := testdb.NewProxy(t)
	pools := []*pgxpool.Pool{
		testdb.PostgresPoolAt(t, proxy.URL(), pgx.QueryExecModeCacheStatement),
		testdb.PostgresPool(t),
		testdb.PostgresPool(t),
	}
	schemas := make([]string, len(pools))
	for i, p := range pools {
		schemas[i] = newBackendOn(t, p).Schema()
	}
	// Cleanups run last first: shard 0's schema is dropped through the
	// proxy, restored by then.
	t.Cleanup(proxy.Restore)
	opts := &shard.Options{Queues: map[string]int{"lost1": 1, "lost2": 2, "tick": 2}}
	open := func() *shard.Backend {
		shards := make([]backend.Backend, len(pools))
		for i, p := range pools {
			b, err := postgres.New(p, &postgres.Options{Schema: schemas[i]})
			if err != nil {
				t.Fatal(err)
			}
			shards[i] = b
		}
		be, err := shard.New(shards, opts)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	const every = time.Second
	newClient := func() *spool.Client {
		ws := spool.NewWorkers()
		spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[effectArgs]) error { return nil }))
		c, err := spool.NewClient(open(), &spool.Config{
			Workers: ws,
			Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
			// A leader's term is 5 s (the least): each client elects
			// every 1.7 s.
			LeaseDuration:  time.Second,
			RescueInterval: 50 * time.Millisecond,
			PollInterval:   50 * time.Millisecond,
			// The queue "tick" has no workers: its jobs stay, one per
			// slot, to be counted.
			AllowUnknownKinds: true,
			PeriodicJobs: []spool.PeriodicJob{{Name: "tick", Schedule: spool.Every(every),
				Args: func(time.Time) spool.JobArgs { return shardTickArgs{} }, Opts: &spool.InsertOpts{Queue: "tick"}}},
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		return c
	}
	be := open()
	ticks := func() []*backend.JobRow {
		t.Helper()
		rows, err := be.Shard(2).JobList(ctx, &backend.JobListParams{Queue: "tick", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	leader := newClient()
	waitFor("the first client to lead and fire the periodic job", func() bool { return len(ticks()) > 0 })
	newClient()
	proxy.Cut()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := leader.Stop(stopCtx); err != nil {
		t.Fatalf("stop the leader: %v", err)
	}
	downAt := time.Now()
	var lost []int64
	for _, q := range []string{"lost1", "lost2"} {
		res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
			{Queue: q, Kind: "effect", Args: []byte(`{}`), MaxAttempts: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: q, Max: 1, Lease: 300 * time.Millisecond, ClaimID: "dead-worker"})
		if err != nil || len(rows) != 1 || rows[0].ID != res.IDs[0] {
			t.Fatalf("claim as the dead worker on queue %s: %d rows, %v", q, len(rows), err)
		}
		lost = append(lost, res.IDs[0])
	}
	for _, id := range lost {
		var j *backend.JobRow
		waitFor(fmt.Sprintf("job %d (shard %d) to be rescued", id, shard.JobShard(id)), func() bool {
			var err error
			if j, err = be.JobGet(ctx, id); err != nil {
				t.Fatal(err)
			}
			return j.State != backend.StateRunning
		})
		if j.State != backend.StateRetryable || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "lease expired") {
			t.Fatalf("rescued job %d: state %s, errors %+v", id, j.State, j.Errors)
		}
	}
	past := downAt.Add(3 * time.Second)
	waitFor("slots fired with shard 0 down", func() bool {
		return slices.ContainsFunc(ticks(), func(j *backend.JobRow) bool { return j.RunAt.After(past) })
	})
	slots := map[time.Time]int{}
	var first, last time.Time
	for _, j := range ticks() {
		at := j.RunAt.UTC()
		slots[at]++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	for at := first; !at.After(last); at = at.Add(every) {
		if slots[at] != 1 {
			t.Fatalf("slot %s has %d jobs, want 1 (slots %s to %s, leader stopped with shard 0 cut off at %s)", at.Format(time.RFC3339Nano), slots[at], first, last, downAt)
		}
	}
	if n := len(slots); n != int(last.Sub(first)/every)+1 {
		t.Fatalf("%d slots fired from %s to %s: some are not on the schedule", n, first, last)
	}
}
