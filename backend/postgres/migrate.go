package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded migrations, parsed once.
var migrations = backend.MustLoadMigrations(migrationFiles, "migrations", "postgres")

// LatestVersion is the newest schema version this backend knows.
func LatestVersion() int { return len(migrations) }

// Migrate applies pending migrations in one transaction under a
// transaction-scoped advisory lock keyed by the schema, so concurrent callers
// serialise and all but the first find nothing to do. It refuses a schema
// newer than this backend knows.
func (b *Backend) Migrate(ctx context.Context) error {
	ms := migrations
	quoted := pgx.Identifier{b.schema}.Sanitize()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('spool migrate ' || $1, 0))`, b.schema); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoted); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+quoted+`.spool_migrations (
  version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, b.sql.schemaVersion).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > len(ms) {
			return fmt.Errorf("%w: database at version %d, this spool knows %d", backend.ErrSchemaTooNew, current, len(ms))
		}
		channel := "'" + strings.ReplaceAll(b.channel, "'", "''") + "'"
		for _, m := range ms[current:] {
			body := strings.NewReplacer("{{schema}}", quoted, "{{channel}}", channel).Replace(m.SQL)
			if _, err := tx.Exec(ctx, body); err != nil {
				return fmt.Errorf("apply migration %d (%s): %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+quoted+`.spool_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %d: %w", m.Version, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// SchemaVersion implements backend.Backend.
func (b *Backend) SchemaVersion(ctx context.Context) (backend.SchemaVersion, error) {
	v := backend.SchemaVersion{Latest: LatestVersion()}
	err := b.pool.QueryRow(ctx, b.sql.schemaVersion).Scan(&v.Current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined table / schema
		return v, nil
	}
	if unavailable(err) {
		return v, fmt.Errorf("read schema version of %q: %w: %w", b.schema, backend.ErrUnavailable, withCause(err))
	}
	if err != nil {
		return v, fmt.Errorf("read schema version of %q: %w", b.schema, err)
	}
	return v, nil
}
