package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

// SQLite's side of the bench scenarios. SQLite rewrites a row in place and
// frees deleted rows' space at once: there are no dead tuples. Its MVCC is
// the write-ahead log: a reader's snapshot is a point in the WAL, and a
// checkpoint cannot copy frames past the oldest reader's point back into
// the database, nor start the WAL over while any reader needs it, so the WAL
// grows for as long as a read transaction stays open. The bloat scenario
// samples the WAL's size where PostgreSQL's dead tuples would be.

func init() {
	benchProbes["sqlite"] = &benchProbe{
		deadMeasure:  "pages of the write-ahead log (-wal file): a reader's snapshot keeps checkpoints from starting it over",
		sampleTable:  sqliteSampleTable,
		holdSnapshot: sqliteHoldSnapshot,
		settle:       sqliteSettle,
	}
}

// sqliteBackend returns be as the SQLite backend.
func sqliteBackend(be backend.Backend) (*sqlite.Backend, error) {
	s, ok := be.(*sqlite.Backend)
	if !ok {
		return nil, fmt.Errorf("%s backend is not SQLite: %w", be.Name(), ErrNotSupported)
	}
	return s, nil
}

// sqliteReader opens a pool of one read-only connection on the backend's
// file, as another process reading it would.
func sqliteReader(s *sqlite.Backend) (*sql.DB, error) {
	db, err := sql.Open(sqlite.DriverSQLName, s.Path())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// sqliteSampleTable reads the WAL's size in pages, the jobs table's rows and
// the database file's size. The WAL file keeps its size after a checkpoint
// (it is written over from the start), so it shows the furthest the log has
// had to grow.
func sqliteSampleTable(ctx context.Context, be backend.Backend) (tableSample, error) {
	s, err := sqliteBackend(be)
	if err != nil {
		return tableSample{}, err
	}
	db, err := sqliteReader(s)
	if err != nil {
		return tableSample{}, fmt.Errorf("sample jobs table: %w", err)
	}
	defer db.Close()
	out := tableSample{HorizonAge: -1} // SQLite does not count transactions
	var pageSize, pages int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT page_size FROM pragma_page_size()), (SELECT page_count FROM pragma_page_count()),
  (SELECT count(*) FROM spool_jobs)`).Scan(&pageSize, &pages, &out.LiveTuples); err != nil {
		return tableSample{}, fmt.Errorf("sample jobs table: %w", err)
	}
	out.TableBytes = pages * pageSize
	fi, err := os.Stat(s.Path() + "-wal")
	switch {
	case err == nil:
		out.DeadTuples = fi.Size() / pageSize
	case !errors.Is(err, fs.ErrNotExist):
		return tableSample{}, fmt.Errorf("sample jobs table: %w", err)
	}
	return out, nil
}

// sqliteHoldSnapshot opens a read transaction on a connection of its own
// and keeps it until release: the WAL cannot be started over meanwhile.
func sqliteHoldSnapshot(ctx context.Context, be backend.Backend) (func() error, string, error) {
	s, err := sqliteBackend(be)
	if err != nil {
		return nil, "", err
	}
	db, err := sqliteReader(s)
	if err != nil {
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	discard := func() error { return errors.Join(conn.Close(), db.Close()) }
	// BEGIN is deferred: the first read starts the read transaction and
	// fixes its snapshot.
	var rows int64
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		_ = discard()
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM spool_jobs`).Scan(&rows); err != nil {
		_ = discard()
		return nil, "", fmt.Errorf("hold snapshot: %w", err)
	}
	release := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, rerr := conn.ExecContext(ctx, `ROLLBACK`)
		if err := errors.Join(rerr, discard()); err != nil {
			return fmt.Errorf("release snapshot: %w", err)
		}
		return nil
	}
	return release, fmt.Sprintf("read transaction on a connection of its own (its snapshot saw %d jobs)", rows), nil
}

// sqliteSettle refreshes the planner's statistics (ANALYZE).
func sqliteSettle(ctx context.Context, be backend.Backend) error {
	s, err := sqliteBackend(be)
	if err != nil {
		return err
	}
	if err := s.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ANALYZE`)
		return err
	}); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}
