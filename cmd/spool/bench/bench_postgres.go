package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

// PostgreSQL's side of the bench scenarios: dead tuples and sizes of the
// jobs table, a session that pins the xmin horizon and VACUUM ANALYZE.

func init() {
	benchProbes["postgres"] = &benchProbe{
		deadMeasure:  "dead tuples of the jobs table (pg_stat_user_tables.n_dead_tup)",
		sampleTable:  pgSampleTable,
		holdSnapshot: pgHoldSnapshot,
		settle:       pgSettle,
	}
}

// PGBackend returns be as the PostgreSQL backend.
func PGBackend(be backend.Backend) (*postgres.Backend, error) {
	pg, ok := be.(*postgres.Backend)
	if !ok {
		return nil, fmt.Errorf("%s backend is not PostgreSQL: %w", be.Name(), ErrNotSupported)
	}
	return pg, nil
}

// pgSampleTable reads the jobs table's statistics. n_dead_tup is flushed by
// each session about once a second, so samples lag by up to that much.
func pgSampleTable(ctx context.Context, be backend.Backend) (tableSample, error) {
	pg, err := PGBackend(be)
	if err != nil {
		return tableSample{}, err
	}
	var s tableSample
	err = pg.Pool().QueryRow(ctx, `
SELECT coalesce(st.n_dead_tup, 0), coalesce(st.n_live_tup, 0),
  (SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL),
  pg_table_size(c.oid), coalesce(pg_relation_size(i.oid), 0)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
LEFT JOIN pg_class i ON i.relnamespace = n.oid AND i.relname = 'spool_jobs_pending'
WHERE n.nspname = $1 AND c.relname = 'spool_jobs'`, pg.Schema()).
		Scan(&s.DeadTuples, &s.LiveTuples, &s.HorizonAge, &s.TableBytes, &s.PendingIndexBytes)
	if err != nil {
		return tableSample{}, fmt.Errorf("sample jobs table: %w", err)
	}
	return s, nil
}

// PGConnect opens a connection of its own with the backend pool's settings.
func PGConnect(ctx context.Context, pg *postgres.Backend, appName string) (*pgx.Conn, error) {
	cfg := pg.Pool().Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = appName
	return pgx.ConnectConfig(ctx, cfg)
}

// pgHoldSnapshot opens a session with a REPEATABLE READ transaction that has
// taken its snapshot: until release, its xmin holds back the horizon below
// which VACUUM and page pruning may remove dead rows, as a forgotten
// transaction or a long report would.
func pgHoldSnapshot(ctx context.Context, be backend.Backend) (func() error, string, error) {
	pg, err := PGBackend(be)
	if err != nil {
		return nil, "", err
	}
	conn, err := PGConnect(ctx, pg, "spool bench bloat: snapshot holder")
	if err != nil {
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	fail := func(err error) (func() error, string, error) {
		_ = conn.Close(context.Background())
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	// Spool's own sessions end a transaction left idle for a minute; this
	// one is meant to stay.
	if _, err := conn.Exec(ctx, `SET idle_in_transaction_session_timeout = 0`); err != nil {
		return fail(err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail(err)
	}
	var xmin string
	if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xmin); err != nil {
		return fail(err)
	}
	var pinned bool
	if err := tx.QueryRow(ctx, `SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&pinned); err != nil {
		return fail(err)
	}
	if !pinned {
		return fail(errors.New("the session's snapshot does not show in pg_stat_activity.backend_xmin"))
	}
	release := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rerr := tx.Rollback(ctx)
		cerr := conn.Close(ctx)
		if err := errors.Join(rerr, cerr); err != nil {
			return fmt.Errorf("release snapshot: %w", err)
		}
		return nil
	}
	return release, fmt.Sprintf("REPEATABLE READ transaction holding a snapshot (xmin %s) in a second session", xmin), nil
}

// pgSettle runs VACUUM ANALYZE on the jobs table.
func pgSettle(ctx context.Context, be backend.Backend) error {
	pg, err := PGBackend(be)
	if err != nil {
		return err
	}
	table := pgx.Identifier{pg.Schema(), "spool_jobs"}.Sanitize()
	if _, err := pg.Pool().Exec(ctx, `VACUUM (ANALYZE) `+table); err != nil {
		return fmt.Errorf("vacuum analyze: %w", err)
	}
	return nil
}
