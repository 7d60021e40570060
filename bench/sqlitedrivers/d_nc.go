//go:build !mattn

package main

import (
	"database/sql"

	ncdriver "github.com/ncruces/go-sqlite3/driver"
	_ "modernc.org/sqlite"
)

func ncOpen(dsn string) (*sql.DB, error) { return ncdriver.Open(dsn, nil) }
