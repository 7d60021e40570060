//go:build !cgo

package sqlite

import (
	"database/sql"
	"errors"
	"strings"

	sqlitedrv "modernc.org/sqlite"
)

// DriverName names the SQLite driver this build uses: mattn/go-sqlite3 (cgo,
// SQLite's own C code) when a C compiler is available, modernc.org/sqlite
// (pure Go) otherwise. docs/sqlite.md has the measurements behind the choice.
const DriverName = "modernc.org/sqlite"

// openPool opens a pool whose every connection is set up by s's pragmas. The
// path is passed without the file: prefix, so it is never read as a URI.
func openPool(path string, s poolSettings) (*sql.DB, error) {
	params := make([]string, 0, 8)
	if s.immediate {
		params = append(params, "_txlock=immediate")
	}
	for _, p := range s.pragmas() {
		name, value, _ := strings.Cut(p, "=")
		params = append(params, "_pragma="+name+"("+value+")")
	}
	return sql.OpenDB(&connector{drv: &sqlitedrv.Driver{}, dsn: path + "?" + strings.Join(params, "&")}), nil
}

// sqliteCode returns the primary SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e *sqlitedrv.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// DriverSQLName is the database/sql driver name this build registers, for
// applications that open their own pool on the file (sql.Open).
const DriverSQLName = "sqlite"
