package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// MySQL's and MariaDB's side of the bench scenarios. InnoDB keeps old row
// versions as undo records instead of dead tuples in the table: a
// transaction holding a consistent snapshot keeps purge from removing them,
// and the history list length (undo logs of transactions not yet purged)
// grows where PostgreSQL's dead tuples would.

func init() {
	benchProbes["mysql"] = &benchProbe{
		deadMeasure:  "InnoDB history list length (transactions whose undo purge has not removed)",
		sampleTable:  mysqlSampleTable,
		holdSnapshot: mysqlHoldSnapshot,
		settle:       mysqlSettle,
	}
}

// mysqlBackend returns be as the MySQL backend.
func mysqlBackend(be backend.Backend) (*mysql.Backend, error) {
	my, ok := be.(*mysql.Backend)
	if !ok {
		return nil, fmt.Errorf("%s backend is not MySQL: %w", be.Name(), ErrNotSupported)
	}
	return my, nil
}

// mysqlCallTimes is a MySQL backend's claim and finish calls at one time.
type mysqlCallTimes struct {
	be *mysql.Backend
	m  mysql.Metrics
}

// mysqlCalls reads be's claim and finish calls when it is a MySQL backend.
func mysqlCalls(be backend.Backend) (mysqlCallTimes, bool) {
	my, err := mysqlBackend(be)
	if err != nil {
		return mysqlCallTimes{}, false
	}
	return mysqlCallTimes{be: my, m: my.Metrics()}, true
}

// since returns the claims and finishes since c, and the mean number of
// each in flight over elapsed.
func (c mysqlCallTimes) since(elapsed time.Duration) (claims, finishes uint64, claimsInFlight, finishesInFlight float64) {
	now := c.be.Metrics()
	return now.Claims - c.m.Claims, now.Finishes - c.m.Finishes,
		float64(now.ClaimTime-c.m.ClaimTime) / float64(elapsed), float64(now.FinishTime-c.m.FinishTime) / float64(elapsed)
}

// mysqlSampleTable reads the history list length and the jobs table's
// estimated rows and sizes (InnoDB's statistics, refreshed as it sees fit).
func mysqlSampleTable(ctx context.Context, be backend.Backend) (tableSample, error) {
	my, err := mysqlBackend(be)
	if err != nil {
		return tableSample{}, err
	}
	s := tableSample{HorizonAge: -1} // InnoDB does not say
	err = my.DB().QueryRowContext(ctx, `
SELECT
  (SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'),
  coalesce(t.table_rows, 0), coalesce(t.data_length + t.index_length, 0),
  coalesce((SELECT stat_value * @@innodb_page_size FROM mysql.innodb_index_stats
            WHERE database_name = t.table_schema AND table_name = t.table_name
              AND index_name = 'spool_jobs_claim' AND stat_name = 'size'), 0)
FROM information_schema.TABLES t
WHERE t.table_schema = ? AND t.table_name = 'spool_jobs'`, my.Database()).
		Scan(&s.DeadTuples, &s.LiveTuples, &s.TableBytes, &s.PendingIndexBytes)
	if err != nil {
		return tableSample{}, fmt.Errorf("sample jobs table: %w", err)
	}
	return s, nil
}

// mysqlHoldSnapshot opens a session with a REPEATABLE READ transaction that
// has taken a consistent snapshot: until release, purge keeps every undo
// record newer than it.
func mysqlHoldSnapshot(ctx context.Context, be backend.Backend) (func() error, string, error) {
	my, err := mysqlBackend(be)
	if err != nil {
		return nil, "", err
	}
	conn, err := my.DB().Conn(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	// The connection never goes back to the pool: it is closed, whatever
	// state the transaction is in.
	discard := func() error {
		// Raw closes the driver connection when told it is bad.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
			return err
		}
		return nil
	}
	fail := func(err error) (func() error, string, error) {
		_ = discard()
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	for _, stmt := range []string{
		`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`,
		`START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`,
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fail(err)
		}
	}
	var thread int64
	if err := conn.QueryRowContext(ctx,
		`SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()`).Scan(&thread); err != nil {
		return fail(fmt.Errorf("the snapshot's transaction is not in INNODB_TRX: %w", err))
	}
	release := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, rerr := conn.ExecContext(ctx, `ROLLBACK`)
		cerr := discard()
		if err := errors.Join(rerr, cerr); err != nil {
			return fmt.Errorf("release snapshot: %w", err)
		}
		return nil
	}
	return release, fmt.Sprintf("REPEATABLE READ transaction WITH CONSISTENT SNAPSHOT in a second session (connection %d)", thread), nil
}

// mysqlSettle refreshes the jobs table's statistics (ANALYZE TABLE); InnoDB
// purges on its own.
func mysqlSettle(ctx context.Context, be backend.Backend) error {
	my, err := mysqlBackend(be)
	if err != nil {
		return err
	}
	rows, err := my.DB().QueryContext(ctx, "ANALYZE TABLE `"+my.Database()+"`.spool_jobs")
	if err != nil {
		return fmt.Errorf("analyze table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analyze table: %w", err)
	}
	return nil
}

// MySQLBackend returns be as the MySQL backend, for the lab's loops of raw
// statements.
func MySQLBackend(be backend.Backend) (*mysql.Backend, error) { return mysqlBackend(be) }
