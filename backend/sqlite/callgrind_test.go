package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

// The tests below are a harness for counting the instructions of the hot
// path under valgrind (deterministic, unlike CPU time on a shared
// machine), in Go with the driver and database/sql included. They run only
// when SPOOL_CALLGRIND names a number of 1,500-job batches, e.g.:
//
//	go test -c -o sqlite.test .
//	SPOOL_CALLGRIND=4 GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 \
//	  valgrind --tool=callgrind --collect-atstart=no \
//	  --toggle-collect='*Backend).JobClaim' ./sqlite.test -test.run 'TestCallgrindClaimFinish$'
//
// then callgrind_annotate: the program total over 6,000 is a claim's
// instructions per job (--toggle-collect='*Backend).JobFinishMany' a
// finish's, SPOOL_CALLGRIND_DELETE=1 deleting). Go's preemption signals
// stop callgrind (asyncpreemptoff), the test goroutine is locked to its
// thread so that what a call does is counted on the thread that toggled,
// and GOGC=off leaves collections out. TestCallgrindClaimSQL counts one
// claim statement of SPOOL_CALLGRIND_SQL instead (toggle
// '*callgrindStatement'), TestCallgrindMinLoop lab ceiling's minimal loop
// (toggle '*callgrindMinStep'). docs/sqlite.md, "The hot path and its
// costs", has the figures.

// callgrindBatch is the jobs of a batch.
const callgrindBatch = 1500

// callgrindSetup returns the batches to run (skipping the test without
// SPOOL_CALLGRIND), a backend and a batch's insert.
func callgrindSetup(t *testing.T) (int, *sqlite.Backend, *backend.JobInsertManyParams) {
	n, _ := strconv.Atoi(os.Getenv("SPOOL_CALLGRIND"))
	if n <= 0 {
		t.Skip("SPOOL_CALLGRIND is not set")
	}
	runtime.LockOSThread()
	ins := make([]*backend.JobInsertParams, callgrindBatch)
	for i := range ins {
		ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "noop", Args: json.RawMessage(`{"n":1}`), MaxAttempts: 25}
	}
	return n, newBackend(t, nil), &backend.JobInsertManyParams{Jobs: ins}
}

// TestCallgrindClaimFinish inserts, claims and finishes batches, in
// claims of SPOOL_CALLGRIND_CLAIM jobs when set (the batch's jobs in as
// many claims as that takes).
func TestCallgrindClaimFinish(t *testing.T) {
	n, be, ins := callgrindSetup(t)
	ctx := context.Background()
	del := os.Getenv("SPOOL_CALLGRIND_DELETE") != ""
	size, _ := strconv.Atoi(os.Getenv("SPOOL_CALLGRIND_CLAIM"))
	if size <= 0 {
		size = callgrindBatch
	}
	for range n {
		if _, err := be.JobInsertMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
		var rows []*backend.JobRow
		for len(rows) < callgrindBatch {
			got, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: size, Lease: time.Hour, ClaimID: "c"})
			if err != nil || len(got) == 0 {
				t.Fatalf("claim: %d, %v", len(got), err)
			}
			rows = append(rows, got...)
		}
		if len(rows) != callgrindBatch {
			t.Fatalf("claimed %d", len(rows))
		}
		fs := make([]backend.JobFinish, len(rows))
		for k, r := range rows {
			fs[k] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
		}
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs, DeleteCompleted: del})
		if err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish: %+v, %v", res, err)
		}
	}
}

// TestCallgrindClaimSQL runs SPOOL_CALLGRIND_SQL (?1 now, ?2 queue, ?3
// max, ?4 lease, ?5 claim id) on batches, its rows scanned into interface
// values, then deletes every job.
func TestCallgrindClaimSQL(t *testing.T) {
	n, be, ins := callgrindSetup(t)
	ctx := context.Background()
	st, err := be.DB().PrepareContext(ctx, os.Getenv("SPOOL_CALLGRIND_SQL"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range n {
		if _, err := be.JobInsertMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
		if err := callgrindStatement(ctx, be, st); err != nil {
			t.Fatal(err)
		}
		if err := be.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DELETE FROM spool_jobs`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

//go:noinline
func callgrindStatement(ctx context.Context, be *sqlite.Backend, st *sql.Stmt) error {
	return be.WriteTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, time.Now().UnixMicro(), "default", callgrindBatch, int64(time.Hour/time.Microsecond), "c")
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		vals, dest := make([]any, len(cols)), make([]any, len(cols))
		for i := range dest {
			dest[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// TestCallgrindMinLoop runs lab ceiling's minimal loop (min-keep, or
// min-delete with SPOOL_CALLGRIND_DELETE) on batches moved into its table.
func TestCallgrindMinLoop(t *testing.T) {
	n, be, ins := callgrindSetup(t)
	ctx := context.Background()
	db := be.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE spool_bench_min (
  id INTEGER PRIMARY KEY, queue TEXT NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
  state TEXT NOT NULL, args TEXT NOT NULL);
CREATE INDEX spool_bench_min_pending ON spool_bench_min (queue, priority, run_at, id)
  WHERE state IN ('available', 'scheduled', 'retryable')`); err != nil {
		t.Fatal(err)
	}
	claim, err := db.PrepareContext(ctx, `UPDATE spool_bench_min SET state = 'running'
WHERE id IN (
  SELECT id FROM spool_bench_min INDEXED BY spool_bench_min_pending
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?1 AND run_at <= ?3
  ORDER BY priority, run_at, id LIMIT ?2)
RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Close()
	fin := `UPDATE spool_bench_min SET state = 'completed' WHERE id IN (`
	if os.Getenv("SPOOL_CALLGRIND_DELETE") != "" {
		fin = `DELETE FROM spool_bench_min WHERE id IN (`
	}
	ids := make([]string, callgrindBatch)
	for i := range ids {
		ids[i] = "?" + strconv.Itoa(i+2)
	}
	finish, err := db.PrepareContext(ctx, fin+strings.Join(ids, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	defer finish.Close()
	for range n {
		if _, err := be.JobInsertMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
		if err := be.WriteTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO spool_bench_min (id, queue, priority, run_at, state, args)
  SELECT id, queue, priority, run_at, state, args FROM spool_jobs;
DELETE FROM spool_jobs`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := callgrindMinStep(ctx, db, claim, finish); err != nil || got != callgrindBatch {
			t.Fatalf("minimal loop: %d, %v", got, err)
		}
	}
}

// callgrindMinStep is one step of the minimal loop: the claim in a
// transaction, then the finish by ids in another.
//
//go:noinline
func callgrindMinStep(ctx context.Context, db *sql.DB, claim, finish *sql.Stmt) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.StmtContext(ctx, claim).QueryContext(ctx, "default", callgrindBatch, time.Now().UnixMicro())
	if err != nil {
		return 0, err
	}
	args := make([]any, 1, callgrindBatch+1)
	args[0] = time.Now().UnixMicro()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		args = append(args, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.StmtContext(ctx, finish).ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
