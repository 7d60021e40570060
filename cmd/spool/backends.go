package main

import (
	"context"
	"net/url"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"

	// Backends the CLI can open, registered by URL scheme. Adding a backend
	// is one import line here; backend-specific extras (schema versions,
	// scratch stores for bench) are optional and live in store_<name>.go.
	_ "github.com/spoolq/spool/backend/mysql"
	_ "github.com/spoolq/spool/backend/postgres"
	_ "github.com/spoolq/spool/backend/sqlite"
)

// openClient opens the backend and an insert-only client over it (no
// Workers: kinds are not checked, and it cannot Start). closeClient releases
// both.
func openClient(ctx context.Context, m *Main, flagValue string) (client *spool.Client, closeClient func(), err error) {
	dsn, err := m.databaseURL(flagValue)
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

// scheme returns the URL scheme of a database URL ("postgres"), as
// backend.Open reads it.
func scheme(dsn string) string {
	if s, _, ok := strings.Cut(dsn, "://"); ok {
		return s
	}
	if u, err := url.Parse(dsn); err == nil {
		return u.Scheme
	}
	return ""
}

// storeSupport holds what the CLI knows about one kind of store beyond the
// backend.Backend interface. Every field is optional.
type storeSupport struct {
	// location names where the backend keeps its tables, for messages
	// (`schema "spool"`).
	location func(be backend.Backend) string
	// newScratch returns a database URL for a fresh, empty store next to the
	// one dsn names, for benchmarks.
	newScratch func(dsn string) (*scratchStore, error)
}

// stores maps URL schemes to their storeSupport; store_<name>.go files fill
// it in their init functions.
var stores = map[string]*storeSupport{}

// supportFor returns the storeSupport for a database URL, never nil.
func supportFor(dsn string) *storeSupport {
	if s, ok := stores[scheme(dsn)]; ok {
		return s
	}
	return &storeSupport{}
}
