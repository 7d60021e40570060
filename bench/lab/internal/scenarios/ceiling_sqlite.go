package scenarios

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// SQLite's raw-SQL loops for the ceiling experiment. They run on the
// backend's own writer connection (sqlite.Backend.DB: one connection, every
// transaction BEGIN IMMEDIATE, the same driver and pragmas as Spool's
// claims), so sessions of one loop take turns on it as Spool's writes do.

func init() {
	ceilingVariants["sqlite"] = []ceilingVariant{
		{
			Name: "min-keep",
			About: "minimal table (id, queue, priority, run_at, state, args; one partial index of pending rows): " +
				"BEGIN IMMEDIATE, UPDATE … SET state = 'running' WHERE id IN (SELECT … LIMIT B) RETURNING id, COMMIT, " +
				"then UPDATE … SET state = 'completed' WHERE id IN (ids) in a transaction of its own",
			open: sqliteCeilingSession(true, false),
		},
		{
			Name:  "min-delete",
			About: "as min-keep, then DELETE … WHERE id IN (ids)",
			open:  sqliteCeilingSession(true, true),
		},
		{
			Name: "raw-keep",
			About: "the minimal statements on Spool's spool_jobs (claim sets state, fence, attempt, lease; " +
				"completion sets state, finalized_at, clears the lease): what the table costs, without Spool's code",
			open: sqliteCeilingSession(false, false),
		},
		{
			Name:  "raw-delete",
			About: "as raw-keep, then DELETE … WHERE id IN (ids)",
			open:  sqliteCeilingSession(false, true),
		},
	}
}

// The minimal table and its statements. The claim's ?1 is the queue, ?2 the
// batch size, ?3 now (microseconds).
const (
	sqliteMinTable = `CREATE TABLE IF NOT EXISTS spool_bench_min (
  id INTEGER PRIMARY KEY, queue TEXT NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
  state TEXT NOT NULL, args TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS spool_bench_min_pending ON spool_bench_min (queue, priority, run_at, id)
  WHERE state IN ('available', 'scheduled', 'retryable')`
	// sqliteMinFill moves the store's pending jobs into the minimal table,
	// so that the loop has the same jobs and spool_jobs ends empty.
	sqliteMinFill = `INSERT INTO spool_bench_min (id, queue, priority, run_at, state, args)
  SELECT id, queue, priority, run_at, state, args FROM spool_jobs WHERE state IN ('available', 'scheduled', 'retryable');
DELETE FROM spool_jobs WHERE state IN ('available', 'scheduled', 'retryable')`
	sqliteMinClaim = `UPDATE spool_bench_min SET state = 'running'
WHERE id IN (
  SELECT id FROM spool_bench_min INDEXED BY spool_bench_min_pending
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = ?1 AND run_at <= ?3
  ORDER BY priority, run_at, id LIMIT ?2)
RETURNING id`
	sqliteMinKeep   = `UPDATE spool_bench_min SET state = 'completed' WHERE id IN ({{ids}})`
	sqliteMinDelete = `DELETE FROM spool_bench_min WHERE id IN ({{ids}})`

	sqliteRawClaim = `UPDATE spool_jobs SET state = 'running', attempt = attempt + 1, fence = fence + 1,
  leased_until = ?3 + 60000000, leased_by = 'ceiling', attempted_at = ?3
WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_pending
  WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND queue = ?1 AND run_at <= ?3
  ORDER BY priority, run_at, id LIMIT ?2)
RETURNING id`
	sqliteRawKeep = `UPDATE spool_jobs SET state = 'completed', finalized_at = ?1, leased_until = NULL, leased_by = NULL
WHERE id IN ({{ids}})`
	sqliteRawDelete = `DELETE FROM spool_jobs WHERE id IN ({{ids}})`
)

// sqliteCeilingSession returns a ceilingVariant's open function: on the
// minimal table (min) or on spool_jobs, completed rows kept or deleted.
func sqliteCeilingSession(min, del bool) func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
	return func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
		sb, ok := be.(*sqlite.Backend)
		if !ok {
			return nil, fmt.Errorf("%s backend is not SQLite: %w", be.Name(), bench.ErrNotSupported)
		}
		db := sb.DB()
		claimSQL, finishSQL := sqliteRawClaim, sqliteRawKeep
		switch {
		case min && del:
			claimSQL, finishSQL = sqliteMinClaim, sqliteMinDelete
		case min:
			claimSQL, finishSQL = sqliteMinClaim, sqliteMinKeep
		case del:
			finishSQL = sqliteRawDelete
		}
		if min && session == 0 {
			// Sessions open one after another: the first moves the jobs.
			if _, err := db.ExecContext(ctx, sqliteMinTable); err != nil {
				return nil, fmt.Errorf("ceiling session: create the minimal table: %w", err)
			}
			if err := sb.WriteTx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, sqliteMinFill)
				return err
			}); err != nil {
				return nil, fmt.Errorf("ceiling session: fill the minimal table: %w", err)
			}
			if _, err := db.ExecContext(ctx, `ANALYZE spool_bench_min`); err != nil {
				return nil, fmt.Errorf("ceiling session: %w", err)
			}
		}
		claim, err := db.PrepareContext(ctx, claimSQL)
		if err != nil {
			return nil, fmt.Errorf("ceiling session: %w", err)
		}
		// Finishes by ids are prepared per batch size: a full batch reuses
		// its statement, the last short one prepares its own.
		finishes := map[int]*sql.Stmt{}
		finishFor := func(n int) (*sql.Stmt, error) {
			if s := finishes[n]; s != nil {
				return s, nil
			}
			s, err := db.PrepareContext(ctx, strings.Replace(finishSQL, "{{ids}}", placeholders(n, 2), 1))
			if err != nil {
				return nil, err
			}
			finishes[n] = s
			return s, nil
		}
		ids := make([]int64, 0, batch)
		args := make([]any, 0, batch+1)
		step := func(ctx context.Context) (int, error) {
			ids = ids[:0]
			tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer pool's transactions are
			if err != nil {
				return 0, fmt.Errorf("claim: %w", err)
			}
			rows, err := tx.StmtContext(ctx, claim).QueryContext(ctx, spool.DefaultQueue, batch, time.Now().UnixMicro())
			if err != nil {
				_ = tx.Rollback()
				return 0, fmt.Errorf("claim: %w", err)
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					_ = tx.Rollback()
					return 0, fmt.Errorf("claim: %w", err)
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				_ = tx.Rollback()
				return 0, fmt.Errorf("claim: %w", err)
			}
			if err := tx.Commit(); err != nil {
				return 0, fmt.Errorf("claim: commit: %w", err)
			}
			if len(ids) == 0 {
				return 0, nil
			}
			fin, err := finishFor(len(ids))
			if err != nil {
				return 0, fmt.Errorf("complete: %w", err)
			}
			args = append(args[:0], time.Now().UnixMicro())
			for _, id := range ids {
				args = append(args, id)
			}
			tx, err = db.BeginTx(ctx, nil)
			if err != nil {
				return 0, fmt.Errorf("complete: %w", err)
			}
			res, err := tx.StmtContext(ctx, fin).ExecContext(ctx, args...)
			if err != nil {
				_ = tx.Rollback()
				return 0, fmt.Errorf("complete: %w", err)
			}
			if err := tx.Commit(); err != nil {
				return 0, fmt.Errorf("complete: commit: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
				return 0, fmt.Errorf("complete: %d of %d claimed jobs (%v)", n, len(ids), err)
			}
			return len(ids), nil
		}
		closeAll := func() {
			_ = claim.Close()
			for _, s := range finishes {
				_ = s.Close()
			}
		}
		return &ceilingSession{step: step, close: closeAll}, nil
	}
}

// placeholders returns n numbered parameters from ?first on: "?2, ?3, …".
func placeholders(n, first int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		b.WriteString(strconv.Itoa(first + i))
	}
	return b.String()
}
