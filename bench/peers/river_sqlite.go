//go:build riversqlite

package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/mattn/go-sqlite3" // "sqlite3": SQLite's C code through cgo, as Spool's default build
	"github.com/riverqueue/river/riverdriver/riversqlite"
	_ "modernc.org/sqlite" // "sqlite": the database/sql driver River's SQLite tests use
)

// riverSQLiteDriver is a database/sql SQLite driver River runs on, with the
// DSN suffix that applies the benchmark's pragmas to every connection it
// opens: WAL, a busy timeout so that River's own concurrent statements wait
// rather than fail, and synchronous FULL (SQLite's default, and Spool's).
type riverSQLiteDriver struct {
	name    string // database/sql driver name
	module  string // its Go module, for the version
	params  string // DSN query: the pragmas
	summary string
}

var (
	riverModernc = riverSQLiteDriver{
		name: "sqlite", module: "modernc.org/sqlite",
		params:  "_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)",
		summary: "WAL, busy_timeout 10s, synchronous FULL",
	}
	riverMattn = riverSQLiteDriver{
		name: "sqlite3", module: "github.com/mattn/go-sqlite3",
		params:  "_journal_mode=WAL&_busy_timeout=10000&_synchronous=FULL",
		summary: "WAL, busy_timeout 10s, synchronous FULL",
	}
)

func init() {
	for name, d := range map[string]riverSQLiteDriver{"river-sqlite": riverModernc, "river-sqlite-cgo": riverMattn} {
		registerRunner(name, func(ctx context.Context, spec *runSpec) (*runResult, error) {
			open := func(ctx context.Context, spec *runSpec) (*riverStore[*sql.Tx], error) {
				return openRiverSQLite(ctx, spec, d)
			}
			return runRiver(ctx, spec, open, "river "+moduleVersion("github.com/riverqueue/river"))
		})
	}
}

// openRiverSQLite opens River's SQLite driver on spec.Path. River's
// documentation asks for a pool of one connection (riversqlite package doc).
func openRiverSQLite(ctx context.Context, spec *runSpec, d riverSQLiteDriver) (*riverStore[*sql.Tx], error) {
	if spec.Path == "" {
		return nil, fmt.Errorf("river sqlite: no database path")
	}
	db, err := sql.Open(d.name, "file:"+spec.Path+"?"+d.params)
	if err != nil {
		return nil, fmt.Errorf("river sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("river sqlite: %w", err)
	}
	return &riverStore[*sql.Tx]{
		driver: riversqlite.New(db),
		count: func(ctx context.Context, query string) (int64, error) {
			var n int64
			if err := db.QueryRowContext(ctx, query).Scan(&n); err != nil {
				return 0, fmt.Errorf("count river jobs: %w", err)
			}
			return n, nil
		},
		settings: map[string]string{
			"driver":  "riversqlite " + moduleVersion("github.com/riverqueue/river/riverdriver/riversqlite") + ", " + d.module + " " + moduleVersion(d.module),
			"pool":    "database/sql, 1 open conn (River's documented setting)",
			"pragmas": d.summary,
		},
		close: func() { db.Close() },
	}, nil
}
