package mysql_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

// galeraArgs is the job of TestGalera: its handler writes an effect row and
// completes the job in the same transaction.
type galeraArgs struct {
	N int `json:"n"`
}

func (galeraArgs) Kind() string { return "galera" }

// TestGalera runs Spool on a three-node MariaDB Galera cluster of its own,
// every node written at once: migrations started on all three nodes
// together leave one schema, each version applied once; then a client on
// each node works one queue, where two nodes often claim the same rows
// under their own locks and one loses at commit (certification, error
// 1213). Every job must complete, none may start twice, and every effect
// written with CompleteTx must be there exactly once.
func TestGalera(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cluster, err := dbserver.StartGalera(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	// The database, created on one node, reaches the others with the DDL.
	bes := make([]*mysql.Backend, cluster.Len())
	for i := range bes {
		url := strings.Replace(cluster.NodeURL(i), "/mysql", "/spool_galera", 1)
		if i == 0 {
			first, err := mysql.Open(ctx, cluster.NodeURL(0))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := first.DB().ExecContext(ctx, "CREATE DATABASE spool_galera"); err != nil {
				t.Fatal(err)
			}
			_ = first.Close()
		}
		be, err := openWhenVisible(ctx, url, conformance.TestLogger(t, slog.LevelWarn))
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = be.Close() })
		bes[i] = be
	}

	// Migrations from every node at once.
	var wg sync.WaitGroup
	errs := make([]error, len(bes))
	for i, be := range bes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = be.Migrate(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate on node %d: %v", i, err)
		}
	}
	for i, be := range bes {
		v, err := be.SchemaVersion(ctx)
		if err != nil || v.Check() != nil {
			t.Fatalf("node %d: schema %+v (%v)", i, v, err)
		}
	}
	var recorded, distinct int
	if err := bes[2].DB().QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT version) FROM spool_migrations").Scan(&recorded, &distinct); err != nil {
		t.Fatal(err)
	}
	if recorded != mysql.LatestVersion() || distinct != recorded {
		t.Fatalf("%d migrations recorded (%d distinct), want each of %d once", recorded, distinct, mysql.LatestVersion())
	}

	if _, err := bes[0].DB().ExecContext(ctx, "CREATE TABLE galera_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, node INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	const jobs = 3000
	inserter, err := spool.NewClient(bes[0], &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]spool.InsertManyParams, jobs)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: galeraArgs{N: i}}
	}
	if _, err := inserter.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	starts := map[int64]int{}
	clients := make([]*spool.Client, len(bes))
	for i, be := range bes {
		ws := spool.NewWorkers()
		spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[galeraArgs]) error {
			mu.Lock()
			starts[j.ID]++
			mu.Unlock()
			tx, err := be.DB().BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO galera_effects (job_id, node) VALUES (?, ?)", j.ID, i); err != nil {
				_ = tx.Rollback()
				return err
			}
			if err := spool.CompleteTx(ctx, tx, j); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}))
		c, err := spool.NewClient(be, &spool.Config{
			Workers: ws,
			Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 20}},
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			_ = c.Stop(context.Background())
		}
	}()
	for {
		stats, err := bes[0].QueueStatsAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := int64(0)
		for _, s := range stats {
			done += s.Counts[backend.StateCompleted]
		}
		if done == jobs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d jobs completed before the deadline", done, jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range clients {
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	twice := 0
	for _, n := range starts {
		if n > 1 {
			twice++
		}
	}
	mu.Unlock()
	if len(starts) != jobs || twice != 0 {
		t.Errorf("%d jobs started, %d of them more than once; want %d, 0", len(starts), twice, jobs)
	}
	// Node 1 certified every commit but may not have applied the last few
	// yet (its receive queue holds up to gcs.fc_limit write sets before flow
	// control pauses the others): a plain read there can miss effects that
	// committed. wsrep_sync_wait makes the read wait until the node has
	// applied everything the cluster committed before it.
	conn, err := bes[1].DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		t.Fatal(err)
	}
	var effects, effectJobs int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT job_id) FROM galera_effects").Scan(&effects, &effectJobs); err != nil {
		t.Fatal(err)
	}
	if effects != jobs || effectJobs != jobs {
		t.Errorf("%d effects for %d jobs, want one for each of %d", effects, effectJobs, jobs)
		rows, err := conn.QueryContext(ctx, `SELECT j.id, j.state, j.attempt FROM spool_jobs j
			LEFT JOIN galera_effects e ON e.job_id = j.id WHERE e.id IS NULL ORDER BY j.id LIMIT 20`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var state string
			var attempt int
			if err := rows.Scan(&id, &state, &attempt); err != nil {
				t.Fatal(err)
			}
			t.Errorf("job %d has no effect: state %s, attempt %d, started %d times", id, state, attempt, starts[id])
		}
	}
	var conflicts uint64
	per := make([]string, len(bes))
	for i, be := range bes {
		m := be.Metrics()
		conflicts += m.Deadlocks
		per[i] = fmt.Sprintf("node %d: %d conflicts retried, %d given up", i, m.Deadlocks, m.RetriesExhausted)
		if m.RetriesExhausted != 0 {
			t.Errorf("node %d gave up on %d operations after conflicts", i, m.RetriesExhausted)
		}
	}
	t.Logf("%d conflicts retried in all (%s)", conflicts, strings.Join(per, "; "))
}

// openWhenVisible opens a backend on a database another node created, once
// the DDL has reached this node. The backend logs to logger.
func openWhenVisible(ctx context.Context, url string, logger *slog.Logger) (*mysql.Backend, error) {
	cfg, opts, err := mysql.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opts.Logger = logger
	for {
		be, err := mysql.OpenConfig(ctx, cfg, opts)
		if err == nil {
			return be, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
