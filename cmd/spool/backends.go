package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"

	// Backends the CLI can open, registered by URL scheme. Adding a backend
	// is one import line here; backend-specific extras (schema versions,
	// scratch stores for bench) are optional and live in store_<name>.go.
	_ "github.com/spoolq/spool/backend/mysql"
	_ "github.com/spoolq/spool/backend/postgres"
	_ "github.com/spoolq/spool/backend/shard"
	_ "github.com/spoolq/spool/backend/sqlite"
)

// openClient opens the backend and an insert-only client over it (no
// Workers: kinds are not checked, and it cannot Start). closeClient releases
// both. It tries once: see openStore.
func openClient(ctx context.Context, m *Main, flagValue string) (client *spool.Client, closeClient func(), err error) {
	return openClientWaiting(ctx, m, flagValue, false)
}

// openClientWaiting is openClient, waiting for the store when wait is set
// (see openStore).
func openClientWaiting(ctx context.Context, m *Main, flagValue string, wait bool) (client *spool.Client, closeClient func(), err error) {
	dsn, err := storeURL(m, flagValue, false)
	if err != nil {
		return nil, nil, err
	}
	be, err := openStore(ctx, m, dsn, wait)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSchema(ctx, be); err != nil {
		_ = be.Close()
		return nil, nil, err
	}
	client, err = spool.NewClient(be, &spool.Config{})
	if err != nil {
		_ = be.Close()
		return nil, nil, err
	}
	return client, func() { _ = be.Close() }, nil
}

// openStore opens the store at dsn. A command run by hand (wait false)
// fails at once when the store cannot be reached: its user would rather
// see why now. migrate and ui, which deployments start beside their
// database in any order, wait for a store that is not reachable yet (wait
// true), logging each failed try and when the next is to Stderr, until it
// opens or the command is interrupted; other errors (a wrong password, a
// database that does not exist) end them at once (see backend.ErrUnavailable).
func openStore(ctx context.Context, m *Main, dsn string, wait bool) (backend.Backend, error) {
	return backend.OpenWith(ctx, dsn, backend.OpenOptions{Once: !wait, Logger: slog.New(slog.NewTextHandler(m.Stderr, nil))})
}

// checkSchema fails with a clear error when the store is not migrated (or
// migrated by a newer Spool), instead of letting a query fail on a missing
// table.
func checkSchema(ctx context.Context, be backend.Backend) error {
	v, err := be.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	return v.Check()
}

// storeURL decides the database URL of a command (cli.DatabaseURL). A
// store kept in a file (SQLite) is created by opening it; only a command
// that creates stores (create: spool migrate) may do that. Any other
// command fails with a *NoStoreError when the file does not exist, leaving
// nothing behind: a look at an empty directory must not leave a spool.db
// in it. When migrate creates the default file (no URL given), it says so
// on Stderr.
func storeURL(m *Main, flagValue string, create bool) (string, error) {
	dsn, err := cli.DatabaseURL(flagValue)
	if err != nil {
		return "", err
	}
	file := stores.For(dsn).File
	if file == nil {
		return dsn, nil
	}
	path, err := file(dsn)
	if err != nil {
		return dsn, nil // the backend's Open says what is wrong with the URL
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return dsn, nil // there, or not readable: Open says which
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	given := cli.DatabaseGiven(flagValue)
	if !create {
		return "", &NoStoreError{Path: path, Given: given}
	}
	if !given {
		fmt.Fprintf(m.Stderr, "spool: no --database-url or $%s given; creating the SQLite file %s\n", cli.EnvDatabaseURL, path)
	}
	return dsn, nil
}

// NoStoreError is the error of a command that reads or changes a store
// kept in a file (SQLite) when the file does not exist: only spool migrate
// creates it.
type NoStoreError struct {
	// Path is the file's absolute path.
	Path string
	// Given tells whether the user named the store (--database-url or
	// $SPOOL_DATABASE_URL), or it is the default ./spool.db.
	Given bool
}

// Error implements error.
func (e *NoStoreError) Error() string {
	if e.Given {
		return fmt.Sprintf("no Spool store at %s: the file does not exist (spool migrate creates it)", e.Path)
	}
	return fmt.Sprintf("no Spool store here: %s does not exist, and no --database-url or $%s names another; "+
		"run 'spool migrate' to create it, or give the URL of your database", e.Path, cli.EnvDatabaseURL)
}
