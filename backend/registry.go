package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Opener opens a backend from a database URL. The backend owns what it opens
// and releases it on Close. An opener tries once; it marks a failure that may
// pass by itself with ErrUnavailable, and Open tries again after those.
type Opener func(ctx context.Context, dsn string) (Backend, error)

// ErrUnavailable marks a failure to reach a store (to open it, or to read
// its schema version) that may pass without anyone changing anything: the server refuses connections or is not
// reachable (it is not running yet, or restarting), it answers that it is
// starting up or shutting down, it has no connection slot free, or its host
// name does not resolve yet (a container's name before its container runs).
// Open and a client's Start try again after these.
//
// Failures that need an operator are not marked, and Open returns them at
// once: a URL that does not parse or names no registered scheme, a rejected
// password or user, a database that does not exist, a TLS configuration
// the server refuses, a schema option the backend does not know. A missing
// database is among them: a database server's start-up creates its
// databases before it accepts connections from the network, so a database
// still missing once the server answers is a wrong name or a missing setup
// step, which waiting cannot fix.
var ErrUnavailable = errors.New("store unavailable")

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
	// registrations holds the schemes of each Register call: one backend's.
	registrations [][]string
)

// Register makes a backend available to Open for the given URL schemes. It is
// meant to be called from a backend package's init function and panics if a
// scheme is registered twice (a programming error, found at start-up).
func Register(opener Opener, schemes ...string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, s := range schemes {
		if _, dup := registry[s]; dup {
			panic("backend: scheme registered twice: " + s)
		}
		registry[s] = opener
	}
	if len(schemes) > 0 {
		registrations = append(registrations, slices.Clone(schemes))
	}
}

// OpenOptions change how OpenWith opens a store.
type OpenOptions struct {
	// Logger receives a warning for each failed try that will be tried
	// again, with its cause and when the next try is. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Once fails at the first error, retrying nothing: for a tool run by
	// hand, whose user would rather see the error now than wait.
	Once bool
}

// Open opens the backend registered for the URL's scheme; the backend's
// package must be imported (for example with a blank import). It is
// OpenWith with default options: a failure marked ErrUnavailable (the
// server not running yet, restarting, out of connection slots, its name not
// resolvable yet) is logged to slog.Default() and tried again with backoff,
// until the store opens or ctx ends, so that a worker started before its
// database waits for it. Bound the wait with ctx's deadline. Other failures
// (see ErrUnavailable) are returned at once.
func Open(ctx context.Context, dsn string) (Backend, error) {
	return OpenWith(ctx, dsn, OpenOptions{})
}

// Backoff between tries of WhileUnavailable: doubled after each failure up
// to retryMaxBackoff, so a store back within a second is found within a
// second, and a long outage costs a try every few seconds.
var (
	retryFirstBackoff = 100 * time.Millisecond
	retryMaxBackoff   = 5 * time.Second
)

// WhileUnavailable calls try until it returns nil or an error not marked
// ErrUnavailable, or ctx ends; it returns how many tries it made. Between
// tries it waits with jittered backoff (0.1 s, doubling to 5 s; workers
// started together do not try together) and logs msg as a warning with
// attrs, the try, its error and the wait. When ctx ends, the error matches
// both ctx's cause and the last failure through errors.Is.
func WhileUnavailable(ctx context.Context, logger *slog.Logger, msg string, attrs []any, try func() error) (int, error) {
	start := time.Now()
	backoff := retryFirstBackoff
	for n := 1; ; n++ {
		err := try()
		if err == nil {
			return n, nil
		}
		gaveUp := func() (int, error) {
			return n, fmt.Errorf("gave up after %d tries in %s: %w; last try: %w",
				n, time.Since(start).Round(time.Millisecond), context.Cause(ctx), err)
		}
		// Before the error's mark: a try that ctx cut short fails with
		// ctx's error, which is not marked ErrUnavailable, and is still a
		// wait given up, not a failure of the store.
		if ctx.Err() != nil {
			return gaveUp()
		}
		if !errors.Is(err, ErrUnavailable) {
			return n, err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		logger.Warn(msg, append(attrs[:len(attrs):len(attrs)], "try", n, "error", err, "next_try_in", wait.Round(time.Millisecond))...)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return gaveUp()
		case <-t.C:
		}
		backoff = min(backoff*2, retryMaxBackoff)
	}
}

// openingKey marks the context of an opener run by OpenWith: an opener that
// opens other stores with Open (the sharded backend) tries each once, and
// the outermost OpenWith retries the whole.
type openingKey struct{}

// OpenWith is Open with options. When ctx ends while it waits to try
// again, the error matches both ctx's error and the last failure's
// (ErrUnavailable among them) through errors.Is.
func OpenWith(ctx context.Context, dsn string, o OpenOptions) (Backend, error) {
	opener, err := lookup(dsn)
	if err != nil {
		return nil, err
	}
	if ctx.Value(openingKey{}) != nil {
		o.Once = true
	} else {
		ctx = context.WithValue(ctx, openingKey{}, true)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if o.Once {
		return opener(ctx, dsn)
	}
	start := time.Now()
	var be Backend
	tries, err := WhileUnavailable(ctx, logger, "spool: cannot open the store yet; trying again", []any{"store", logName(dsn)}, func() (err error) {
		be, err = opener(ctx, dsn)
		return err
	})
	if err != nil {
		if tries > 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("open backend: %w", err)
		}
		return nil, err
	}
	if tries > 1 {
		logger.Info("spool: store opened", "store", logName(dsn), "tries", tries, "waited", time.Since(start).Round(time.Millisecond))
	}
	return be, nil
}

// lookup finds the opener of the URL's scheme.
func lookup(dsn string) (Opener, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
			scheme = u.Scheme
		} else {
			return nil, fmt.Errorf("open backend: %q is not a URL (want scheme://…, one of %s)", redact(dsn), strings.Join(Schemes(), ", "))
		}
	}
	registryMu.RLock()
	opener, found := registry[scheme]
	registryMu.RUnlock()
	if !found {
		b := builtinSchemes[scheme]
		return nil, &UnregisteredSchemeError{Scheme: scheme, Package: b.pkg, Module: b.module, Registered: Schemes()}
	}
	return opener, nil
}

// ErrUnregisteredScheme is matched by every *UnregisteredSchemeError.
var ErrUnregisteredScheme = errors.New("no backend registered for the URL's scheme")

// builtinBackend is where one of Spool's own backends lives.
type builtinBackend struct {
	pkg    string // the package whose import registers it
	module string // the module to require for it; "" in Spool's root module
}

// builtinSchemes maps the URL schemes of Spool's own backends to where
// each backend lives.
var builtinSchemes = map[string]builtinBackend{
	"memory":     {pkg: "github.com/spoolq/spool/backend/memory"},
	"shard":      {pkg: "github.com/spoolq/spool/backend/shard"},
	"mysql":      {pkg: "github.com/spoolq/spool/backend/mysql", module: "github.com/spoolq/spool/backend/mysql"},
	"postgres":   {pkg: "github.com/spoolq/spool/backend/postgres", module: "github.com/spoolq/spool/backend/postgres"},
	"postgresql": {pkg: "github.com/spoolq/spool/backend/postgres", module: "github.com/spoolq/spool/backend/postgres"},
	"sqlite":     {pkg: "github.com/spoolq/spool/backend/sqlite", module: "github.com/spoolq/spool/backend/sqlite"},
}

// UnregisteredSchemeError is Open's error for a URL whose scheme no
// imported package registered. For a scheme of one of Spool's own backends
// it names the package to import (a backend registers itself when its
// package is imported, usually with a blank import) and the module to
// require, so that a program built without it says how to fix it.
type UnregisteredSchemeError struct {
	// Scheme is the URL's scheme ("postgres").
	Scheme string
	// Package is the import path of the Spool backend that registers
	// Scheme; "" when no backend of Spool's does.
	Package string
	// Module is the module to require for Package (go get), "" when
	// Package is in the module github.com/spoolq/spool itself.
	Module string
	// Registered are the schemes this program can open, sorted.
	Registered []string
}

// Error implements error.
func (e *UnregisteredSchemeError) Error() string {
	registered := "none"
	if len(e.Registered) > 0 {
		registered = strings.Join(e.Registered, ", ")
	}
	if e.Package == "" {
		return fmt.Sprintf("open backend: no backend for scheme %q (registered: %s)", e.Scheme, registered)
	}
	fix := fmt.Sprintf("import _ %q", e.Package)
	if e.Module != "" {
		fix += " (go get " + e.Module + ")"
	}
	return fmt.Sprintf("open backend: no backend for scheme %q in this program: add %s; registered: %s", e.Scheme, fix, registered)
}

// Is makes every UnregisteredSchemeError match ErrUnregisteredScheme.
func (e *UnregisteredSchemeError) Is(target error) bool { return target == ErrUnregisteredScheme }

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Backends lists the registered backends by their schemes: one entry per
// Register call, with its schemes in the order given, sorted by first
// scheme. A backend registered under several schemes (postgres and
// postgresql) is one entry, where Schemes lists each scheme.
func Backends() [][]string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([][]string, len(registrations))
	for i, r := range registrations {
		out[i] = slices.Clone(r)
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// redact hides a password in a URL-like string for error messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}

// logName names a store in log lines without its secrets: the URL without
// its user's password, or only its scheme when a password could hide
// elsewhere in it (a query parameter, or the URLs of a sharded store).
func logName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || strings.Contains(strings.ToLower(u.RawQuery), "password") || strings.Contains(dsn, ";") {
		scheme, _, _ := strings.Cut(dsn, "://")
		return scheme + "://…"
	}
	return u.Redacted()
}
