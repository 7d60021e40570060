// Package stores holds what the spool command knows about each kind of
// store beyond backend.Backend, by URL scheme: where a backend keeps its
// tables (for messages) and how to make a scratch store beside a database
// (for benchmarks). A kind of store registers itself in its own file.
//
// Public for the lab (the bench/lab module), which shares the spool
// command's plumbing; no compatibility promise.
package stores

import (
	"context"
	"net/url"
	"strings"

	"github.com/spoolq/spool/backend"
)

// Scheme returns the URL scheme of a database URL ("postgres"), as
// backend.Open reads it.
func Scheme(dsn string) string {
	if s, _, ok := strings.Cut(dsn, "://"); ok {
		return s
	}
	if u, err := url.Parse(dsn); err == nil {
		return u.Scheme
	}
	return ""
}

// Support holds what the CLI knows about one kind of store beyond the
// backend.Backend interface. Every field is optional.
type Support struct {
	// Location names where the backend keeps its tables, for messages
	// (`schema "spool"`).
	Location func(be backend.Backend) string
	// NewScratch returns a database URL for a fresh, empty store next to the
	// one dsn names, for benchmarks.
	NewScratch func(dsn string) (*Scratch, error)
	// File returns the path of the file the store dsn names lives in, for a
	// store kept in a file that opening it creates (SQLite): a command
	// that must not create a store checks that the file exists first.
	File func(dsn string) (string, error)
}

// registry maps URL schemes to their Support; each store's file fills it
// in its init function.
var registry = map[string]*Support{}

// For returns the Support for a database URL, never nil.
func For(dsn string) *Support {
	if s, ok := registry[Scheme(dsn)]; ok {
		return s
	}
	return &Support{}
}

// Scratch is a fresh store for one benchmark run.
type Scratch struct {
	// URL opens the scratch store with backend.Open.
	URL string
	// Name names the store in output (the schema name for PostgreSQL).
	Name string
	// Drop removes the store and everything in it. It uses a connection of
	// its own and succeeds when there is nothing to drop.
	Drop func(ctx context.Context) error
}
