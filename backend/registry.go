package backend

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Opener opens a backend from a database URL. The backend owns what it opens
// and releases it on Close.
type Opener func(ctx context.Context, dsn string) (Backend, error)

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

// Open opens the backend registered for the URL's scheme. The backend's
// package must be imported (for example with a blank import).
func Open(ctx context.Context, dsn string) (Backend, error) {
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
	return opener(ctx, dsn)
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
