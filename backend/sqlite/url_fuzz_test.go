package sqlite_test

import (
	"strings"
	"testing"

	"github.com/spoolq/spool/backend/sqlite"
)

// FuzzParseURL: any string either parses to a non-empty path and options
// the backend knows, or fails with an error; nothing panics, and a URL that
// does not start with sqlite:// never parses.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite://spool.db", "sqlite:///tmp/a%20b.db?spool_busy=fair&spool_busy_timeout=5s",
		"sqlite://", "sqlite://x?spool_busy_timeout=-1s", "sqlite://%zz", "postgres://x", "sqlite://a?b=c&b=d",
		"sqlite://a?spool_synchronous=off", "sqlite://\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		path, opts, err := sqlite.ParseURL(dsn)
		if err != nil {
			if path != "" || opts != nil {
				t.Fatalf("%q: error %v with a result (%q, %+v)", dsn, err, path, opts)
			}
			return
		}
		if !strings.HasPrefix(dsn, "sqlite://") || path == "" || opts == nil {
			t.Fatalf("%q parsed to (%q, %+v)", dsn, path, opts)
		}
		if opts.BusyTimeout < 0 {
			t.Fatalf("%q: negative busy timeout %s", dsn, opts.BusyTimeout)
		}
	})
}
