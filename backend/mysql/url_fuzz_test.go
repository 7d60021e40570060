package mysql_test

import (
	"testing"

	"github.com/spoolq/spool/backend/mysql"
)

// FuzzParseURL: any string either parses to a driver config whose database
// name passes ValidateDatabase and options in their documented ranges, or
// fails with an error; nothing panics.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"mysql://root@127.0.0.1:3306/test", "mysql://u:p@h/db?spool_claim=optimistic&spool_claim_window=3",
		"mysql://h/", "mysql://h/db?spool_claim_window=-1", "mysql://h/db%60; drop", "mysql://h/db?tls=skip-verify",
		"mysql://h:99999/db", "postgres://h/db", "mysql://[::1]:3306/db?spool_max_conns=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		cfg, opts, err := mysql.ParseURL(dsn)
		if err != nil {
			return
		}
		if cfg == nil || opts == nil {
			t.Fatalf("%q: nil result without an error", dsn)
		}
		if err := mysql.ValidateDatabase(cfg.DBName); err != nil {
			t.Fatalf("%q parsed to database %q that does not validate: %v", dsn, cfg.DBName, err)
		}
		if opts.ClaimWindow < 0 || opts.ClaimWindow > 100000 || opts.MaxConns < 0 {
			t.Fatalf("%q parsed to options out of range: %+v", dsn, opts)
		}
	})
}
