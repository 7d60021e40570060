package scenarios

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// MySQL's and MariaDB's raw-SQL loops for the ceiling experiment: the
// minimal hand-written claim loop (issue "Speed III"), on a minimal table
// and on Spool's own.

func init() {
	ceilingVariants["mysql"] = []ceilingVariant{
		{
			Name: "min-keep",
			About: "minimal loop on a minimal table (id, queue, priority, run_at, state, args; one index " +
				"(queue, state, priority, run_at, id)): SELECT … FOR UPDATE SKIP LOCKED, UPDATE SET state = 'running' " +
				"by ids, COMMIT, then UPDATE SET state = 'completed' by ids",
			open:  mysqlCeilingSession(mysqlMinTable, false),
			alter: mysqlAlter(mysqlMinTable),
		},
		{
			Name:  "min-delete",
			About: "as min-keep, then DELETE by ids",
			open:  mysqlCeilingSession(mysqlMinTable, true),
			alter: mysqlAlter(mysqlMinTable),
		},
		{
			Name: "min-spool-keep",
			About: "the statements of min-keep on Spool's own spool_jobs (phase = 1 for state = 'available'): " +
				"what the table costs, without Spool's statements",
			open:  mysqlCeilingSession(mysqlSpoolTable, false),
			alter: mysqlAlter(mysqlSpoolTable),
		},
		{
			Name:  "min-spool-delete",
			About: "as min-spool-keep, then DELETE by ids",
			open:  mysqlCeilingSession(mysqlSpoolTable, true),
			alter: mysqlAlter(mysqlSpoolTable),
		},
		{
			Name: "stmt-spool-keep",
			About: "as min-spool-keep with the columns Spool's claim and kept completion write (attempt, fence, " +
				"leased_by padded to 64 bytes, attempted_at; finalized_at) and the completion's lease list " +
				"((id, fence) IN …, NOT has_dependents); --loop-omit leaves parts out",
			open:  mysqlCeilingSession(mysqlSpoolStatements, false),
			alter: mysqlAlter(mysqlSpoolStatements),
		},
		{
			Name:  "stmt-spool-delete",
			About: "as stmt-spool-keep, then DELETE by ids with the lease list",
			open:  mysqlCeilingSession(mysqlSpoolStatements, true),
			alter: mysqlAlter(mysqlSpoolStatements),
		},
	}
}

// mysqlLoopOmit is --loop-omit: the parts of Spool's statements the
// stmt-spool loops leave out, to price each (mysqlStatementParts).
var mysqlLoopOmit []string

// mysqlStatementParts are the parts of Spool's claim and completion that
// the stmt-spool loops add to the minimal statements, by --loop-omit name:
// the claim's assignments, the kept completion's, and the completions'
// lease list.
var mysqlStatementParts = []string{"attempt", "fence", "leased_by", "attempted_at", "finalized_at", "lease_list"}

// mysqlOmitted reports whether --loop-omit names part.
func mysqlOmitted(part string) bool { return slices.Contains(mysqlLoopOmit, part) }

// mysqlLoopTable is the table a minimal loop runs on.
type mysqlLoopTable struct {
	// setup, when not empty, creates and fills the table from the jobs the
	// run inserted into spool_jobs, and empties spool_jobs; {{db}} is the
	// quoted database.
	setup []string
	// claim selects a batch; "LIMIT n FOR UPDATE SKIP LOCKED" is appended.
	// Param: the queue.
	claim string
	// table is the table's quoted name after {{db}}.
	table string
	// running and done are more assignments of the claim's UPDATE and of
	// the keeping finish's, for the table's rules.
	running, done string
	// spoolStatements adds the parts of Spool's own claim and completion
	// (mysqlStatementParts) not in --loop-omit; the claim then reads each
	// row's fence sixth.
	spoolStatements bool
}

var (
	// mysqlMinTable is the minimal table: the columns a claim needs, with
	// the types spool_jobs gives them, and the one index claims read.
	mysqlMinTable = mysqlLoopTable{
		setup: []string{
			`CREATE TABLE {{db}}.spool_bench_min (
  id       BIGINT NOT NULL AUTO_INCREMENT,
  queue    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  priority SMALLINT NOT NULL,
  run_at   DATETIME(6) NOT NULL,
  state    ENUM('available', 'scheduled', 'retryable', 'running', 'completed', 'discarded', 'cancelled') NOT NULL,
  args     JSON NOT NULL,
  PRIMARY KEY (id),
  KEY spool_bench_min_claim (queue, state, priority, run_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
			`INSERT INTO {{db}}.spool_bench_min (id, queue, priority, run_at, state, args)
SELECT id, queue, priority, run_at, state, args FROM {{db}}.spool_jobs ORDER BY id`,
			// TRUNCATE, not DELETE: no purge work left to run during the loop.
			// The steps' and signals' tables reference spool_jobs (and are
			// empty here); TRUNCATE refuses a referenced table unless this
			// session's checks are off.
			`SET SESSION foreign_key_checks = 0`,
			`TRUNCATE TABLE {{db}}.spool_jobs`,
			`SET SESSION foreign_key_checks = 1`,
		},
		claim: `SELECT id, queue, priority, run_at, args FROM {{db}}.spool_bench_min
WHERE queue = ? AND state = 'available' AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id`,
		table: "spool_bench_min",
	}
	// mysqlSpoolTable is Spool's own table, read through its claim index.
	mysqlSpoolTable = mysqlLoopTable{
		claim: `SELECT id, queue, priority, run_at, args FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id`,
		table: "spool_jobs",
		// A running row holds a lease end; a finish leaves it (schema 16:
		// a lease means nothing once the job stops running).
		running: ", leased_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE",
	}
	// mysqlSpoolStatements is Spool's table with the writes of Spool's own
	// claim and completion (claim_update.sql, complete.sql, delete_done.sql,
	// completeFast's lease list); spoolStatements marks it.
	mysqlSpoolStatements = mysqlLoopTable{
		claim: `SELECT id, queue, priority, run_at, args, fence FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id`,
		table:           "spool_jobs",
		running:         ", leased_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE",
		spoolStatements: true,
	}
)

// spoolParts returns t's claim and kept-completion assignments with the
// parts of Spool's statements not omitted.
func (t mysqlLoopTable) spoolParts() (running, done string) {
	running, done = t.running, t.done
	if !t.spoolStatements {
		return running, done
	}
	if !mysqlOmitted("attempt") {
		running += ", attempt = attempt + 1"
	}
	if !mysqlOmitted("fence") {
		running += ", fence = fence + 1"
	}
	if !mysqlOmitted("leased_by") {
		running += ", leased_by = '" + fmt.Sprintf("%-64s", "spool-bench-ceiling") + "'"
	}
	if !mysqlOmitted("attempted_at") {
		running += ", attempted_at = UTC_TIMESTAMP(6)"
	}
	if !mysqlOmitted("finalized_at") {
		done += ", finalized_at = UTC_TIMESTAMP(6)"
	}
	return running, done
}

// mysqlCeilingSession returns the open function of a minimal loop on t.
// Each session is a connection of its own from the backend's pool (READ
// COMMITTED, as every connection of the pool): BEGIN, the claim's SELECT,
// UPDATE SET state = 'running' by ids, COMMIT; then, autocommitted, an
// UPDATE SET state = 'completed' or a DELETE by ids.
func mysqlCeilingSession(t mysqlLoopTable, deleteDone bool) func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
	return func(ctx context.Context, be backend.Backend, batch, session int) (*ceilingSession, error) {
		my, err := bench.MySQLBackend(be)
		if err != nil {
			return nil, err
		}
		db := "`" + strings.ReplaceAll(my.Database(), "`", "``") + "`"
		r := strings.NewReplacer("{{db}}", db)
		conn, err := my.DB().Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("ceiling session: %w", err)
		}
		closeConn := func() { _ = conn.Close() }
		if session == 0 {
			// Sessions open one after another: the first sets the table up.
			for _, q := range t.setup {
				if _, err := conn.ExecContext(ctx, r.Replace(q)); err != nil {
					closeConn()
					return nil, fmt.Errorf("ceiling session: set up %s: %w", t.table, err)
				}
			}
		}
		claim := r.Replace(t.claim) + "\nLIMIT " + strconv.Itoa(batch) + " FOR UPDATE SKIP LOCKED"
		table := db + "." + t.table
		runningSet, doneSet := t.spoolParts()
		running := "UPDATE " + table + " SET state = 'running'" + runningSet + " WHERE id IN "
		finish := "UPDATE " + table + " SET state = 'completed'" + doneSet + " WHERE id IN "
		if deleteDone {
			finish = "DELETE FROM " + table + " WHERE id IN "
		}
		leaseList := t.spoolStatements && !mysqlOmitted("lease_list")
		spent := map[string]time.Duration{}
		step := func(ctx context.Context) (int, error) {
			ids, fences, err := mysqlLoopClaim(ctx, conn, claim, running, t.spoolStatements, spent)
			for tries := 1; err != nil && retryableMySQL(err) && tries < 10; tries++ {
				// A claim that locks in index order beside deletes that
				// lock by primary key can deadlock: rolled back, it
				// starts over, as Spool's claims do.
				ids, fences, err = mysqlLoopClaim(ctx, conn, claim, running, t.spoolStatements, spent)
			}
			if err != nil || len(ids) == 0 {
				return 0, err
			}
			q := finish + idList(ids)
			if leaseList {
				// As completeFast before the lease guard: the fence each
				// claim raised (none with fence omitted), beside Spool's
				// guard for jobs with dependents.
				raised := int64(1)
				if mysqlOmitted("fence") {
					raised = 0
				}
				q += " AND NOT has_dependents AND (id, fence) IN " + leaseRowList(ids, fences, raised)
			}
			start := time.Now()
			res, err := conn.ExecContext(ctx, q)
			spent["4 finish"] += time.Since(start)
			if err != nil {
				return 0, fmt.Errorf("finish: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
				return 0, fmt.Errorf("finish: %d of %d claimed jobs (%v)", n, len(ids), err)
			}
			return len(ids), nil
		}
		return &ceilingSession{step: step, close: closeConn, spent: spent}, nil
	}
}

// mysqlLoopClaim runs one claim transaction and returns the claimed ids
// and, when withFence, the fences read before the claim. spent gets the
// wall time of each statement added.
func mysqlLoopClaim(ctx context.Context, conn *sql.Conn, claim, running string, withFence bool, spent map[string]time.Duration) (ids []int64, fences []int64, err error) {
	start := time.Now()
	lap := func(name string) {
		now := time.Now()
		spent[name] += now.Sub(start)
		start = now
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	lap("0 begin")
	rows, err := tx.QueryContext(ctx, claim, spool.DefaultQueue)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	for rows.Next() {
		var (
			id       int64
			queue    string
			priority int
			runAt    sql.RawBytes
			args     sql.RawBytes
			fence    int64
		)
		dest := []any{&id, &queue, &priority, &runAt, &args}
		if withFence {
			dest = append(dest, &fence)
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("claim: %w", err)
		}
		ids = append(ids, id)
		fences = append(fences, fence)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	lap("1 claim select")
	if len(ids) > 0 {
		res, err := tx.ExecContext(ctx, running+idList(ids))
		lap("2 claim update")
		if err != nil {
			return nil, nil, fmt.Errorf("claim: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
			return nil, nil, fmt.Errorf("claim: marked %d of %d locked rows (%v)", n, len(ids), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	lap("3 commit")
	return ids, fences, nil
}

// idList renders ids as "(1,2,3)".
func idList(ids []int64) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(')')
	return b.String()
}

// leaseRowList renders (id, fence+raise) pairs as the row list
// "((1,2),(3,4))" of the completion before the lease guard.
func leaseRowList(ids, fences []int64, raise int64) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d,%d)", id, fences[i]+raise)
	}
	b.WriteByte(')')
	return b.String()
}

// retryableMySQL reports a deadlock or lock wait timeout, after which the
// transaction was rolled back and may start over.
func retryableMySQL(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// mysqlAlter returns a variant's alter function for table t.
func mysqlAlter(t mysqlLoopTable) func(ctx context.Context, be backend.Backend, clauses string) error {
	return func(ctx context.Context, be backend.Backend, clauses string) error {
		my, err := bench.MySQLBackend(be)
		if err != nil {
			return err
		}
		db := "`" + strings.ReplaceAll(my.Database(), "`", "``") + "`"
		// The clauses are the bench operator's own SQL, run on a scratch
		// database.
		_, err = my.DB().ExecContext(ctx, "ALTER TABLE "+db+"."+t.table+" "+clauses)
		return err
	}
}
