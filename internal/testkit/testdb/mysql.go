package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mysqlDriver is the database/sql driver name the MySQL helpers open
// through. This module does not import the driver, so that the modules
// requiring it for their tests (backend/postgres among them) do not list a
// MySQL driver: a test using these helpers links it through backend/mysql,
// which imports github.com/go-sql-driver/mysql.
const mysqlDriver = "mysql"

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
		dsn, err := adminDSN(MySQLURL())
		if err != nil {
			mysqlAdminErr = err
			return
		}
		mysqlAdmin, err = sql.Open(mysqlDriver, dsn)
		if err != nil {
			mysqlAdminErr = fmt.Errorf("open (the test must link github.com/go-sql-driver/mysql, as backend/mysql does): %w", err)
			return
		}
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

// adminDSN reads a mysql:// URL the way the backend's ParseURL does, its
// spool_* parameters left out, and returns the driver's DSN for it, with
// times parsed: this module imports no backend, so that the backends'
// modules can require it for their tests without a cycle.
func adminDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse MySQL URL: %w", err)
	}
	if u.Scheme != "mysql" {
		return "", fmt.Errorf("MySQL URL scheme %q, want mysql", u.Scheme)
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "spool_") {
			q.Del(k)
		}
	}
	q.Set("parseTime", "true")
	var user string
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			user += ":" + p
		}
		user += "@"
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1:3306"
	} else if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	return user + "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + "?" + q.Encode(), nil
}
