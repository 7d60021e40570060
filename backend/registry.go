package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
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

// Backoff between tries of OpenWith: doubled after each failure up to
// openMaxBackoff, so a store back within a second is found within a
// second, and a long outage costs a try every few seconds.
var (
	openFirstBackoff = 100 * time.Millisecond
	openMaxBackoff   = 5 * time.Second
)

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
	start := time.Now()
	backoff := openFirstBackoff
	for try := 1; ; try++ {
		be, err := opener(ctx, dsn)
		if err == nil {
			if try > 1 {
				logger.Info("spool: store opened", "store", logName(dsn), "tries", try, "waited", time.Since(start).Round(time.Millisecond))
			}
			return be, nil
		}
		if o.Once || !errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, gaveUp(ctx, try, start, err)
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jittered: workers started together do not try together
		logger.Warn("spool: cannot open the store yet; trying again",
			"store", logName(dsn), "try", try, "error", err, "next_try_in", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, gaveUp(ctx, try, start, err)
		case <-t.C:
		}
		backoff = min(backoff*2, openMaxBackoff)
	}
}

// gaveUp is OpenWith's error when ctx ended between tries.
func gaveUp(ctx context.Context, tries int, start time.Time, last error) error {
	return fmt.Errorf("open backend: gave up after %d tries in %s: %w; last try: %w",
		tries, time.Since(start).Round(time.Millisecond), context.Cause(ctx), last)
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
		return nil, fmt.Errorf("open backend: no backend for scheme %q (registered: %s)", scheme, strings.Join(Schemes(), ", "))
	}
	return opener, nil
}

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
