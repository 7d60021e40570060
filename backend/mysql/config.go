package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// sqlMode is the SQL mode of every session the backend opens: strict, so a
// value that does not fit its column is an error instead of being silently
// truncated or replaced.
const sqlMode = "STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

// lockWaitTimeout bounds, in seconds, how long a statement of the backend's
// own sessions waits for a row lock before InnoDB gives up (error 1205,
// retried), unless the URL sets innodb_lock_wait_timeout. The server default
// of 50 s would stall a heartbeat for longer than a lease.
const lockWaitTimeout = 10

// ParseURL translates a mysql:// URL into a driver configuration and the
// backend options its spool_* parameters set. Parameters other than the
// spool_* ones are handed to go-sql-driver/mysql, which treats unknown ones
// as session variables.
func ParseURL(raw string) (*mysql.Config, *Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, errors.New("database URL does not parse")
	}
	if u.Scheme != "mysql" {
		return nil, nil, fmt.Errorf("database URL scheme %q, want mysql", u.Scheme)
	}
	q := u.Query()
	opts := &Options{ClaimStrategy: q.Get(ClaimParam), ClaimLock: q.Get(ClaimLockParam), WakeRouting: q.Get(WakeRoutingParam)}
	for _, p := range []struct {
		name string
		dst  *int
	}{{WindowParam, &opts.ClaimWindow}, {MaxConnsParam, &opts.MaxConns}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, nil, fmt.Errorf("%s=%q: want a positive integer", p.name, v)
			}
			*p.dst = n
		}
		q.Del(p.name)
	}
	q.Del(ClaimParam)
	q.Del(ClaimLockParam)
	q.Del(WakeRoutingParam)
	cfg, err := mysql.ParseDSN("/?" + q.Encode())
	if err != nil {
		return nil, nil, fmt.Errorf("database URL parameters: %w", err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1:3306"
	} else if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.Net, cfg.Addr = "tcp", host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, nil, fmt.Errorf("database URL names no database (want mysql://user@host:port/database)")
	}
	// Refuse here what OpenConfig would refuse, so a bad URL is caught where
	// it is parsed (found by FuzzParseURL).
	if err := ValidateDatabase(cfg.DBName); err != nil {
		return nil, nil, err
	}
	if l := opts.ClaimLock; l != "" && l != ClaimLockQueue && l != ClaimLockOff {
		return nil, nil, fmt.Errorf("%s=%q: want queue or off", ClaimLockParam, l)
	}
	if r := opts.WakeRouting; r != "" && r != WakeRoutingLooker && r != WakeRoutingOn && r != WakeRoutingOff {
		return nil, nil, fmt.Errorf("%s=%q: want looker, on or off", WakeRoutingParam, r)
	}
	if opts.ClaimWindow > 100000 {
		return nil, nil, fmt.Errorf("%s=%d is out of range 1..100000", WindowParam, opts.ClaimWindow)
	}
	return cfg, opts, nil
}

// driverConfig returns a copy of cfg with the client-side settings the
// backend relies on.
func driverConfig(cfg *mysql.Config) *mysql.Config {
	c := cfg.Clone()
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true // one round trip per statement, no server-side prepares
	c.ClientFoundRows = true   // affected rows count matched rows
	c.MultiStatements = false
	c.Collation = "utf8mb4_general_ci"
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 5 * time.Minute // a peer gone silent, not a slow statement
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = time.Minute
	}
	c.MaxAllowedPacket = 0 // read the server's limit
	return c
}

// sessionConfig is driverConfig plus the session variables every connection
// of the pool sets when it connects.
func sessionConfig(cfg *mysql.Config, info serverInfo) *mysql.Config {
	c := driverConfig(cfg)
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["sql_mode"] = "'" + sqlMode + "'"
	c.Params["time_zone"] = "'+00:00'"
	c.Params[info.isolationVar] = "'READ-COMMITTED'"
	if _, ok := c.Params["innodb_lock_wait_timeout"]; !ok {
		c.Params["innodb_lock_wait_timeout"] = strconv.Itoa(lockWaitTimeout)
	}
	if info.mariaDB {
		// A session of Spool's own never idles inside a transaction; one that
		// does is a half-dead client: let the server end it and free its locks.
		c.Params["idle_transaction_timeout"] = "60"
	}
	return c
}

// serverInfo is what the backend learns about the server at Open.
type serverInfo struct {
	version      string // as reported by VERSION()
	mariaDB      bool
	skipLocked   bool
	isolationVar string // transaction_isolation, or tx_isolation on MariaDB before 11.1
	maxPacket    int    // max_allowed_packet in bytes
	autoIncStep  int64  // auto_increment_increment
	// galera is a MariaDB Galera node (wsrep_on): row locks are the
	// node's own, and a conflict with another node's writes shows as a
	// deadlock (1213) at commit.
	galera bool
}

// probeServer opens one connection with the caller's settings (no session
// variables yet) to learn the server's version and limits. versionOverride,
// when set, replaces the version the server reports (tests).
func probeServer(ctx context.Context, cfg *mysql.Config, versionOverride string) (serverInfo, error) {
	connector, err := mysql.NewConnector(driverConfig(cfg))
	if err != nil {
		return serverInfo{}, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	var info serverInfo
	if err := db.QueryRowContext(ctx, `SELECT VERSION(), @@max_allowed_packet, @@auto_increment_increment`).
		Scan(&info.version, &info.maxPacket, &info.autoIncStep); err != nil {
		return serverInfo{}, fmt.Errorf("read server version: %w", err)
	}
	if versionOverride != "" {
		info.version = versionOverride
	}
	info.mariaDB, info.skipLocked = parseVersion(info.version)
	info.isolationVar = "transaction_isolation"
	var iso string
	if err := db.QueryRowContext(ctx, `SELECT @@transaction_isolation`).Scan(&iso); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1193 { // unknown system variable
			return serverInfo{}, fmt.Errorf("read isolation level: %w", err)
		}
		info.isolationVar = "tx_isolation"
	}
	if info.autoIncStep < 1 {
		info.autoIncStep = 1
	}
	if info.mariaDB {
		if err := db.QueryRowContext(ctx, `SELECT @@wsrep_on`).Scan(&info.galera); err != nil {
			var me *mysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1193 { // unknown system variable: no wsrep
				return serverInfo{}, fmt.Errorf("read wsrep_on: %w", err)
			}
		}
	}
	return info, nil
}

// parseVersion reads a VERSION() string and reports whether the server is
// MariaDB and whether it supports SELECT … FOR UPDATE SKIP LOCKED: MariaDB
// from 10.6, MySQL from 8.0.1. An unparsable version supports nothing.
func parseVersion(v string) (mariaDB, skipLocked bool) {
	mariaDB = strings.Contains(strings.ToLower(v), "mariadb")
	// MariaDB once prefixed its version for old replication clients.
	v = strings.TrimPrefix(v, "5.5.5-")
	num, _, _ := strings.Cut(v, "-")
	parts := strings.SplitN(num, ".", 3)
	if len(parts) < 2 {
		return mariaDB, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	patch := 0
	if len(parts) == 3 {
		p, err := strconv.Atoi(strings.TrimRightFunc(parts[2], func(r rune) bool { return r < '0' || r > '9' }))
		if err == nil {
			patch = p
		}
	}
	if err1 != nil || err2 != nil {
		return mariaDB, false
	}
	at := major*1_000_000 + minor*1_000 + patch
	if mariaDB {
		return true, at >= 10_006_000
	}
	return false, at >= 8_000_001
}
