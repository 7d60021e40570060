package main

import (
	"context"
	"log/slog"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"

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
	dsn, err := m.DatabaseURL(flagValue)
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
