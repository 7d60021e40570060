//go:build cgo

package sqlite

import (
	"database/sql"
	"errors"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// DriverName names the SQLite driver this build uses: mattn/go-sqlite3 (cgo,
// SQLite's own C code) when a C compiler is available, modernc.org/sqlite
// (pure Go) otherwise. docs/sqlite.md has the measurements behind the choice.
const DriverName = "mattn/go-sqlite3"

// openPool opens a pool whose every connection is set up by s's pragmas. The
// path is passed without the file: prefix, so it is never read as a URI.
//
// Connections open without SQLite's per-connection mutex (_mutex=no,
// SQLITE_OPEN_NOMUTEX): database/sql never uses a connection from two
// goroutines at once (every call holds the connection's lock), the
// driver's interrupt on a cancelled context is safe from any thread, and
// statements are closed by database/sql, not left to finalizers. With the
// mutex, every sqlite3_column_* call of every row locked and unlocked it:
// 7% of a claim's instructions (docs/sqlite.md, "The hot path and its
// costs"). The pure-Go driver always opens connections with it.
func openPool(path string, s poolSettings) (*sql.DB, error) {
	dsn := path + "?_mutex=no"
	if s.immediate {
		dsn += "&_txlock=immediate"
	}
	pragmas := s.pragmas()
	drv := &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		for _, p := range pragmas {
			if _, err := c.Exec("PRAGMA "+p, nil); err != nil {
				return err
			}
		}
		return nil
	}}
	return sql.OpenDB(&connector{drv: drv, dsn: dsn}), nil
}

// sqliteCode returns the primary SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e sqlite3.Error
	if errors.As(err, &e) {
		return int(e.Code)
	}
	return 0
}

// DriverSQLName is the database/sql driver name this build registers, for
// applications that open their own pool on the file (sql.Open).
const DriverSQLName = "sqlite3"
