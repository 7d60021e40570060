package backend_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// flaky is an opener registered for the scheme "flaky-test": it fails with
// the errors queued in fails, one per try, then opens a memory store.
type flaky struct {
	mu    sync.Mutex
	fails []error
	tries int
}

var flakyOpener = &flaky{}

func init() {
	backend.Register(func(ctx context.Context, dsn string) (backend.Backend, error) {
		f := flakyOpener
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tries++
		if len(f.fails) > 0 {
			err := f.fails[0]
			f.fails = f.fails[1:]
			return nil, err
		}
		return memory.New(), nil
	}, "flaky-test")
	// A backend of two schemes, for TestBackendsOncePerRegistration.
	backend.Register(func(context.Context, string) (backend.Backend, error) { return memory.New(), nil }, "twin-test", "twin-test-alias")
}

// setFlaky queues failures for the flaky opener; tests using it run one at
// a time.
func setFlaky(t *testing.T, fails ...error) {
	t.Helper()
	flakyOpener.mu.Lock()
	flakyOpener.fails, flakyOpener.tries = fails, 0
	flakyOpener.mu.Unlock()
}

func flakyTries() int {
	flakyOpener.mu.Lock()
	defer flakyOpener.mu.Unlock()
	return flakyOpener.tries
}

var errRefused = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

// TestOpenRetriesUnavailable: failures marked ErrUnavailable are tried
// again, each logged with its cause and the wait before the next try;
// the store opens once they stop.
func TestOpenRetriesUnavailable(t *testing.T) {
	unavail := func() error { return errors.Join(backend.ErrUnavailable, errRefused) }
	setFlaky(t, unavail(), unavail())
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	be, err := backend.OpenWith(context.Background(), "flaky-test://x", backend.OpenOptions{Logger: logger})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	_ = be.Close()
	if got := flakyTries(); got != 3 {
		t.Fatalf("tries: %d, want 3", got)
	}
	out := logs.String()
	if n := strings.Count(out, "cannot open the store yet; trying again"); n != 2 {
		t.Fatalf("want 2 warnings, one per failed try, got %d:\n%s", n, out)
	}
	for _, want := range []string{"connection refused", "next_try_in=", "try=1", "try=2", "store=flaky-test://x", "store opened", "tries=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestOpenFinalErrorsAtOnce: a failure not marked ErrUnavailable (a bad
// URL, a refused password) is returned at the first try, and Once returns
// even an unavailable store's failure at once.
func TestOpenFinalErrorsAtOnce(t *testing.T) {
	final := errors.New("password authentication failed")
	setFlaky(t, final)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := backend.OpenWith(context.Background(), "flaky-test://x", backend.OpenOptions{Logger: logger}); !errors.Is(err, final) {
		t.Fatalf("open: got %v, want the authentication failure", err)
	}
	if got := flakyTries(); got != 1 {
		t.Fatalf("tries: %d, want 1", got)
	}
	setFlaky(t, errors.Join(backend.ErrUnavailable, errRefused))
	if _, err := backend.OpenWith(context.Background(), "flaky-test://x", backend.OpenOptions{Logger: logger, Once: true}); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("open once: got %v, want ErrUnavailable", err)
	}
	if got := flakyTries(); got != 1 {
		t.Fatalf("tries with Once: %d, want 1", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("nothing retried, yet logged:\n%s", logs.String())
	}
	for _, dsn := range []string{"nope", "nosuchscheme://x"} {
		if _, err := backend.Open(context.Background(), dsn); err == nil || errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("open %q: got %v, want a final error", dsn, err)
		}
	}
}

// TestOpenBoundedByContext: when ctx ends while the store is unavailable,
// Open returns an error matching both ctx's error and the last failure.
func TestOpenBoundedByContext(t *testing.T) {
	fails := make([]error, 1000)
	for i := range fails {
		fails[i] = errors.Join(backend.ErrUnavailable, errRefused)
	}
	setFlaky(t, fails...)
	ctx, cancel := context.WithCancel(context.Background())
	logs := make(chan struct{}, 1000)
	logger := slog.New(handlerFunc(func(r slog.Record) {
		logs <- struct{}{}
	}))
	done := make(chan error, 1)
	go func() {
		_, err := backend.OpenWith(ctx, "flaky-test://x", backend.OpenOptions{Logger: logger})
		done <- err
	}()
	<-logs // a failed try, and a wait for the next
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("open with ctx cancelled: got %v, want context.Canceled and the last failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open did not return within 10 s of its context's end")
	}
}

// TestWhileUnavailableTryCutShort: a try that ctx's end cuts short fails
// with ctx's error, which is not marked ErrUnavailable; the wait is still
// reported as given up (the CLI's migrate says so), not as the store's
// failure. Failed in CI when a deadline fell during a connect rather than
// between tries.
func TestWhileUnavailableTryCutShort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	n, err := backend.WhileUnavailable(ctx, slog.New(handlerFunc(func(slog.Record) {})), "waiting", nil, func() error {
		tries++
		if tries == 1 {
			return errors.Join(backend.ErrUnavailable, errRefused)
		}
		cancel() // the deadline falls during the second try
		return fmt.Errorf("open: %w", ctx.Err())
	})
	if n != 2 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "gave up after 2 tries") {
		t.Fatalf("try cut short by ctx: %d tries, %v; want 2 tries and a wait given up", n, err)
	}
	// A failure that is not the store's unavailability, ctx still live,
	// returns as it is, at the first try.
	final := errors.New("bad password")
	n, err = backend.WhileUnavailable(context.Background(), slog.New(handlerFunc(func(slog.Record) {})), "waiting", nil, func() error { return final })
	if n != 1 || err != final {
		t.Fatalf("final failure: %d tries, %v; want 1 try and the failure itself", n, err)
	}
}

// handlerFunc is a slog.Handler calling f for each record.
type handlerFunc func(slog.Record)

func (h handlerFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (h handlerFunc) Handle(_ context.Context, r slog.Record) error { h(r); return nil }
func (h handlerFunc) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h handlerFunc) WithGroup(string) slog.Handler                 { return h }

// TestOpenUnregisteredScheme: a URL of one of Spool's backends whose
// package this program does not import (this module imports no SQL
// backend) names the package to import and the module to require; an
// unknown scheme lists the registered ones. Both are typed, and neither is
// tried again.
func TestOpenUnregisteredScheme(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		dsn, scheme, pkg string
	}{
		{"postgres://app@db:5432/app", "postgres", "github.com/spoolq/spool/backend/postgres"},
		{"postgresql://app@db/app", "postgresql", "github.com/spoolq/spool/backend/postgres"},
		{"mysql://root@db/app", "mysql", "github.com/spoolq/spool/backend/mysql"},
		{"sqlite://spool.db", "sqlite", "github.com/spoolq/spool/backend/sqlite"},
	} {
		_, err := backend.Open(ctx, tc.dsn)
		var unreg *backend.UnregisteredSchemeError
		if !errors.As(err, &unreg) || !errors.Is(err, backend.ErrUnregisteredScheme) || errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("open %s: %v, want an *UnregisteredSchemeError", tc.dsn, err)
		}
		if unreg.Scheme != tc.scheme || unreg.Package != tc.pkg || unreg.Module != tc.pkg {
			t.Errorf("open %s: %+v, want scheme %s, package and module %s", tc.dsn, unreg, tc.scheme, tc.pkg)
		}
		for _, want := range []string{`import _ "` + tc.pkg + `"`, "go get " + tc.pkg, "registered: ", "memory"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("open %s: %q lacks %q", tc.dsn, err, want)
			}
		}
	}
	_, err := backend.Open(ctx, "nosuchscheme://x")
	var unreg *backend.UnregisteredSchemeError
	if !errors.As(err, &unreg) || unreg.Package != "" || !strings.Contains(err.Error(), `no backend for scheme "nosuchscheme" (registered: `) ||
		strings.Contains(err.Error(), "import _") {
		t.Fatalf("open of an unknown scheme: %v (%+v), want the registered schemes and no import to add", err, unreg)
	}
}

// TestBackendsOncePerRegistration: a backend registered under several
// schemes is listed once, with all of them; Schemes lists each scheme.
func TestBackendsOncePerRegistration(t *testing.T) {
	var found []string
	for _, schemes := range backend.Backends() {
		if slices.Contains(schemes, "twin-test") || slices.Contains(schemes, "twin-test-alias") {
			if found != nil {
				t.Fatalf("the twin backend is listed twice: %v and %v", found, schemes)
			}
			found = schemes
		}
	}
	if !slices.Equal(found, []string{"twin-test", "twin-test-alias"}) {
		t.Fatalf("twin backend listed as %v, want [twin-test twin-test-alias]", found)
	}
	all := backend.Schemes()
	if !slices.Contains(all, "twin-test") || !slices.Contains(all, "twin-test-alias") || !slices.Contains(all, "memory") {
		t.Fatalf("Schemes() = %v, want each scheme", all)
	}
}
