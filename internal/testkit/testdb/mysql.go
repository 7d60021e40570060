package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend/backendtest"
	spoolmysql "github.com/spoolq/spool/backend/mysql"
)

// MySQLURL is the MySQL/MariaDB server tests use: $SPOOL_TEST_MYSQL_URL, or
// the local server on 127.0.0.1:3306. Its database is where test databases
// are created from; each test gets a fresh one.
func MySQLURL() string {
	if u := os.Getenv("SPOOL_TEST_MYSQL_URL"); u != "" {
		return u
	}
	return "mysql://root@127.0.0.1:3306/test"
}

// MySQLDatabaseURL is MySQLURL pointed at another database, with the pool
// capped at PoolMaxConns and extra query parameters (for example
// spool_claim=optimistic, or spool_max_conns to change the cap).
func MySQLDatabaseURL(database string, params url.Values) string {
	u, err := url.Parse(MySQLURL())
	if err != nil {
		panic("testdb: $SPOOL_TEST_MYSQL_URL does not parse: " + err.Error())
	}
	u.Path = "/" + database
	q := u.Query()
	q.Set("spool_max_conns", strconv.Itoa(PoolMaxConns))
	for k, vs := range params {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// NewMySQLDatabaseName returns a unique database name for a test.
func NewMySQLDatabaseName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "spool_test_" + hex.EncodeToString(b[:])
}

var (
	mysqlAdminOnce sync.Once
	mysqlAdmin     *sql.DB
	mysqlAdminErr  error
)

// MySQLAdmin returns a pool to the test server for creating and dropping
// databases and for looking at them; it stays open for the whole test run.
func MySQLAdmin(t testing.TB) *sql.DB {
	t.Helper()
	mysqlAdminOnce.Do(func() {
		cfg, _, err := spoolmysql.ParseURL(MySQLURL())
		if err != nil {
			mysqlAdminErr = err
			return
		}
		cfg.ParseTime = true
		connector, err := drv.NewConnector(cfg)
		if err != nil {
			mysqlAdminErr = err
			return
		}
		mysqlAdmin = sql.OpenDB(connector)
		mysqlAdmin.SetMaxOpenConns(8)
	})
	if mysqlAdminErr != nil {
		t.Fatalf("MySQL test URL %s: %v", MySQLURL(), mysqlAdminErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mysqlAdmin.PingContext(ctx); err != nil {
		t.Fatalf("MySQL/MariaDB at %s does not answer (start it as the README says): %v", MySQLURL(), err)
	}
	return mysqlAdmin
}

// NewMySQLDatabase creates an empty database, dropped when the test ends, and
// returns its name.
func NewMySQLDatabase(t testing.TB) string {
	t.Helper()
	admin := MySQLAdmin(t)
	name := NewMySQLDatabaseName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return name
}

// MySQL returns a backend on its own migrated database, dropped when the
// test ends. params are added to the URL (spool_claim=optimistic, …).
func MySQL(t testing.TB, params url.Values) *spoolmysql.Backend {
	t.Helper()
	name := NewMySQLDatabase(t)
	be := OpenMySQL(t, name, params)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return be
}

// OpenMySQL opens another backend on an existing database, closed when the
// test ends (before the database is dropped).
func OpenMySQL(t testing.TB, database string, params url.Values) *spoolmysql.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, opts, err := spoolmysql.ParseURL(MySQLDatabaseURL(database, params))
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	// The backend's notices (the driver's among them) are shown only if the
	// test fails.
	opts.Logger = backendtest.TestLogger(t, slog.LevelWarn)
	be, err := spoolmysql.OpenConfig(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("open MySQL backend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}
