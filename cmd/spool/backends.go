package main

import (
	"context"

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
// both.
func openClient(ctx context.Context, m *Main, flagValue string) (client *spool.Client, closeClient func(), err error) {
	dsn, err := m.DatabaseURL(flagValue)
	if err != nil {
		return nil, nil, err
	}
	be, err := backend.Open(ctx, dsn)
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
