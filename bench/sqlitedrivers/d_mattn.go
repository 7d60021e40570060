//go:build mattn

package main

import (
	"database/sql"

	_ "github.com/mattn/go-sqlite3"
	_ "modernc.org/sqlite"
)

func ncOpen(string) (*sql.DB, error) { panic("no") }
