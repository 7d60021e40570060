package mysql

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// statementBreak separates the statements of a migration file.
const statementBreak = "\n-- statement\n"

type migration struct {
	version    int
	name       string
	statements []string
}

// loadMigrations returns the embedded migrations in version order, each
// split into its statements.
func loadMigrations() ([]migration, error) {
	files, err := backend.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	out := make([]migration, len(files))
	for i, f := range files {
		out[i] = migration{version: f.Version, name: f.Name}
		for _, s := range strings.Split(f.SQL, statementBreak) {
			if s = strings.TrimSpace(s); s != "" {
				out[i].statements = append(out[i].statements, s)
			}
		}
	}
	return out, nil
}

// migrations are the embedded migrations, parsed once; a malformed file is a
// build defect, so it stops the program at start-up (and fails every test).
var migrations = func() []migration {
	ms, err := loadMigrations()
	if err != nil {
		panic("spool mysql: embedded migrations: " + err.Error())
	}
	return ms
}()

// LatestVersion is the newest schema version this backend knows.
func LatestVersion() int { return len(migrations) }

// Migrate applies pending migrations under a named lock (GET_LOCK) keyed by
// the database, held on one connection, so concurrent callers serialise and
// all but the first find nothing to do. MySQL commits each DDL statement on
// its own, so a migration is written to be safe to run again after a failure
// part-way; its version is recorded once all its statements ran. It refuses
// a schema newer than this backend knows.
func (b *Backend) Migrate(ctx context.Context) error {
	if err := b.migrate(ctx, len(migrations)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// migrate applies the migrations up to version target.
func (b *Backend) migrate(ctx context.Context, target int) error {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	sum := sha256.Sum256([]byte(b.database))
	lock := "spool_migrate_" + hex.EncodeToString(sum[:12])
	var got int
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 60)`, lock).Scan(&got); err != nil || got != 1 {
		if err == nil {
			err = errors.New("timed out after 60s")
		}
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, lock) }()
	db := quoteIdent(b.database)
	if b.server.galera {
		release, err := b.clusterMigrationLock(ctx, conn, db)
		if err != nil {
			return err
		}
		defer release()
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+db+`.spool_migrations (
  version    INT NOT NULL PRIMARY KEY,
  name       VARCHAR(255) NOT NULL,
  applied_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	var current int
	if err := conn.QueryRowContext(ctx, b.sql.schemaVersion).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: database at version %d, this spool knows %d", backend.ErrSchemaTooNew, current, len(migrations))
	}
	for _, m := range migrations[min(current, target):target] {
		for i, s := range m.statements {
			if _, err := conn.ExecContext(ctx, strings.ReplaceAll(s, "{{db}}", db)); err != nil {
				return fmt.Errorf("apply migration %d (%s), statement %d: %w", m.version, m.name, i+1, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+db+`.spool_migrations (version, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6))`,
			m.version, m.name); err != nil {
			return fmt.Errorf("record migration %d: %w", m.version, err)
		}
	}
	return nil
}

// clusterMigrationLock takes the migration lock of a Galera cluster: GET_LOCK
// is the node's own, so migrators on two nodes would both run the DDL. The
// lock is a row, which certification lets only one node insert; it expires
// after 10 minutes, so a migrator that died holding it stops nobody for
// long. The session also waits for the node to have applied every write
// the cluster committed before its reads (wsrep_sync_wait), so the version
// it reads after taking the lock is the one the previous holder left.
func (b *Backend) clusterMigrationLock(ctx context.Context, conn *sql.Conn, db string) (release func(), err error) {
	if _, err := conn.ExecContext(ctx, `SET SESSION wsrep_sync_wait = 1`); err != nil {
		return nil, fmt.Errorf("take cluster migration lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+db+`.spool_migrate_lock (
  name       VARCHAR(64) NOT NULL PRIMARY KEY,
  holder     VARCHAR(64) NOT NULL,
  expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB`); err != nil {
		return nil, fmt.Errorf("create cluster migration lock: %w", err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	holder := hex.EncodeToString(id[:])
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := conn.ExecContext(ctx, `DELETE FROM `+db+`.spool_migrate_lock WHERE name = 'migrate' AND expires_at < UTC_TIMESTAMP(6)`)
		if err == nil {
			_, err = conn.ExecContext(ctx, `INSERT INTO `+db+`.spool_migrate_lock (name, holder, expires_at)
VALUES ('migrate', ?, UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE)`, holder)
		}
		if err == nil {
			break
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || (me.Number != 1062 && me.Number != errLockDeadlock) { // held, or lost certification
			return nil, fmt.Errorf("take cluster migration lock: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("take cluster migration lock: held by another migrator for over 2 minutes: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `DELETE FROM `+db+`.spool_migrate_lock WHERE name = 'migrate' AND holder = ?`, holder)
	}, nil
}

// SchemaVersion implements backend.Backend.
func (b *Backend) SchemaVersion(ctx context.Context) (backend.SchemaVersion, error) {
	v := backend.SchemaVersion{Latest: LatestVersion()}
	err := b.db.QueryRowContext(ctx, b.sql.schemaVersion).Scan(&v.Current)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 { // table does not exist
		return v, nil
	}
	if unavailable(err) {
		return v, fmt.Errorf("read schema version of %q: %w: %w", b.database, backend.ErrUnavailable, err)
	}
	if err != nil {
		return v, fmt.Errorf("read schema version of %q: %w", b.database, err)
	}
	return v, nil
}
