package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded migrations, parsed once.
var migrations = backend.MustLoadMigrations(migrationFiles, "migrations", "sqlite")

// LatestVersion is the newest schema version this backend knows.
func LatestVersion() int { return len(migrations) }

// Migrate applies pending migrations in one IMMEDIATE transaction, which
// serialises concurrent migrators (in this process and others): all but the
// first find nothing to do. A database newer than this backend is refused
// before anything is written.
func (b *Backend) Migrate(ctx context.Context) error {
	v, err := b.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if v.Current > v.Latest {
		return fmt.Errorf("migrate: %w", v.Check())
	}
	if v.Current == v.Latest {
		return nil
	}
	err = b.st.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, stmt.createMigrationsTable); err != nil {
			return fmt.Errorf("create migrations table: %w", err)
		}
		var current int
		if err := tx.QueryRowContext(ctx, stmt.schemaVersion).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > len(migrations) {
			return fmt.Errorf("%w: database at version %d, this spool knows %d", backend.ErrSchemaTooNew, current, len(migrations))
		}
		for _, m := range migrations[current:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply migration %d (%s): %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, stmt.recordMigration,
				m.Version, m.Name, time.Now().UnixMicro()); err != nil {
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
	var exists int
	err := b.st.readers.QueryRowContext(ctx,
		stmt.migrationsTableExists).Scan(&exists)
	if err != nil {
		return v, fmt.Errorf("read schema version: %w", err)
	}
	if exists == 0 {
		return v, nil
	}
	err = b.st.readers.QueryRowContext(ctx, stmt.schemaVersion).Scan(&v.Current)
	if errors.Is(err, sql.ErrNoRows) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
