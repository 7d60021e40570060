// Package dbserver starts PostgreSQL and MariaDB servers of a caller's own,
// in a temporary directory and on a free loopback port, for tests and bench
// chaos that restart or kill a server: the shared servers are never touched.
package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server is a database server started by this package.
type Server interface {
	// URL is a database URL of the server.
	URL() string
	// Restart restarts the server; mode is "fast" or "immediate" for
	// PostgreSQL (pg_ctl's shutdown modes), "clean" or "kill" for MariaDB.
	Restart(ctx context.Context, mode string) error
	// Stop stops the server by its PID; the directory is the caller's.
	Stop() error
}

// PGBinDir is where Debian's PostgreSQL 15 keeps initdb and pg_ctl.
const PGBinDir = "/usr/lib/postgresql/15/bin"

// Ports for servers of this package's own come from below the kernel's
// ephemeral range: a port picked by binding port 0 is an ephemeral one, and
// between the pick and the server's bind the kernel may hand it to any
// outgoing connection (every test's database clients make many) or to the
// next pick, and the server then fails to start. Ports handed out once are
// not handed out again by this process, nor by another while this one
// lives (reservePort).
const (
	serverPortLow  = 20000
	serverPortHigh = 32768 // Linux's default ephemeral range starts here
)

var (
	portsMu  sync.Mutex
	portsOut = map[int]bool{}
)

// serverPortRange is the range freeLoopbackPort picks from: from
// serverPortLow up to the start of this machine's ephemeral range.
func serverPortRange() (low, high int) {
	low, high = serverPortLow, serverPortHigh
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil && start < high {
				high = start
			}
		}
	}
	return low, high
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 at the time of the
// call, outside the ephemeral range, and not returned before by this
// process.
func freeLoopbackPort() (int, error) {
	low, high := serverPortRange()
	portsMu.Lock()
	defer portsMu.Unlock()
	if high-low >= 1000 {
		for range 200 {
			port := low + rand.IntN(high-low)
			if portsOut[port] {
				continue
			}
			if !reservePort(port) {
				continue
			}
			portsOut[port] = true // reserved for this process, free or not
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue
			}
			_ = l.Close()
			return port, nil
		}
	}
	// The ephemeral range covers the usual server ports: let the kernel pick.
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !portsOut[port] && reservePort(port) {
			portsOut[port] = true
			return port, nil
		}
	}
	return 0, errors.New("find a free port: none free on 127.0.0.1")
}

// Test binaries of several packages run at once (go test -p), each
// starting servers, and a server restarted by its test leaves its port
// free for a moment: another process could pick that port then and start
// its own server on it, which the first test's clients would reach after
// the restart. So a port is reserved across processes for the lifetime of
// the process that picked it, by an exclusive flock on a file named after
// it in portLockDir; the kernel drops the lock when that process exits,
// whatever the way, and the file is reused (the files are never removed:
// an unlink would race with another process's open; there is at most one
// per port of the range).
var portLocks = map[int]*os.File{} // held until the process exits; under portsMu

// portLockDir holds the ports' lock files: one directory for every
// process of the machine, whatever its TMPDIR (the lab's tests give each
// command a TMPDIR of its own, and check it is left empty).
const portLockDir = "/tmp/spool-test-ports"

// reservePort takes port for this process unless another process holds it.
// Without a lock directory it reserves nothing and says yes: the per-process
// record still applies.
func reservePort(port int) bool {
	dir := portLockDir
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	portLocks[port] = f
	return true
}

// runLogged runs a command with a deadline, returning its output in the
// error if it fails.
func runLogged(ctx context.Context, timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// chownToPostgres gives paths to the postgres OS user, which PostgreSQL's
// and PgBouncer's binaries switch to when this process is root.
func chownToPostgres(paths ...string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres OS user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// asPostgresUser returns how to run a PostgreSQL binary: as is, or, when
// this process is root (PostgreSQL refuses to run as root), through
// runuser as the postgres OS user, to whom dir is then given.
func asPostgresUser(dir string) (func(bin string, args ...string) (string, []string), error) {
	if os.Geteuid() != 0 {
		return func(bin string, args ...string) (string, []string) { return bin, args }, nil
	}
	if err := chownToPostgres(dir); err != nil {
		return nil, err
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return nil, fmt.Errorf("running as root needs runuser: %w", err)
	}
	return func(bin string, args ...string) (string, []string) {
		return runuser, append([]string{"-u", "postgres", "--", bin}, args...)
	}, nil
}

// Postgres is a PostgreSQL cluster of the caller's own.
type Postgres struct {
	dir, data string
	port      int
	// asUser runs a PostgreSQL binary as the postgres OS user when this
	// process is root (PostgreSQL refuses to run as root).
	asUser func(bin string, args ...string) (string, []string)
}

// Options change how a server is configured.
type Options struct {
	// Listen is one more address for the server to listen on, besides
	// 127.0.0.1 (where its port was found free); clients from TrustNet, a
	// network in CIDR notation, are let in without a password.
	Listen, TrustNet string
	// Durable keeps the durability of a default installation (PostgreSQL's
	// fsync, InnoDB's flush at every commit) instead of trading it for
	// speed: for benchmarks, whose figures should hold for a real server.
	Durable bool
	// MaxConnections is PostgreSQL's max_connections, with no slots
	// reserved for superusers (the tests connect as one), for tests of a
	// server that has no connection free; 0 means 200.
	MaxConnections int
	// Settings are lines added to PostgreSQL's postgresql.conf, after the
	// ones above (e.g. "shared_preload_libraries = 'pg_stat_statements'");
	// MariaDB ignores them.
	Settings []string
}

// StartPostgres creates a cluster under dir with initdb and starts it with
// pg_ctl on a free port. Missing binaries are an error, never a skip.
func StartPostgres(ctx context.Context, dir string) (*Postgres, error) {
	return StartPostgresWith(ctx, dir, Options{})
}

// StartPostgresWith is StartPostgres with options.
func StartPostgresWith(ctx context.Context, dir string, o Options) (*Postgres, error) {
	initdb := filepath.Join(PGBinDir, "initdb")
	if _, err := os.Stat(initdb); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %s not found (install postgresql-15): %w", initdb, err)
	}
	s := &Postgres{dir: dir, data: filepath.Join(dir, "pgdata")}
	var err error
	if s.asUser, err = asPostgresUser(dir); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	s.port = port
	name, args := s.asUser(initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if err := runLogged(ctx, 2*time.Minute, name, args...); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	listen, fsync := "127.0.0.1", "off"
	if o.Listen != "" {
		listen += "," + o.Listen
	}
	if o.Durable {
		fsync = "on"
	}
	maxConns, reserved := 200, 3
	if o.MaxConnections > 0 {
		maxConns, reserved = o.MaxConnections, 0
	}
	conf := fmt.Sprintf("\n# dbserver\nport = %d\nlisten_addresses = '%s'\nunix_socket_directories = '%s'\n"+
		"fsync = %s\nmax_connections = %d\nsuperuser_reserved_connections = %d\nlog_min_messages = warning\n",
		port, listen, dir, fsync, maxConns, reserved)
	for _, line := range o.Settings {
		conf += line + "\n"
	}
	err = appendFile(filepath.Join(s.data, "postgresql.conf"), conf)
	if err == nil && o.TrustNet != "" {
		err = appendFile(filepath.Join(s.data, "pg_hba.conf"), "host all all "+o.TrustNet+" trust\n")
	}
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: configure: %w", err)
	}
	if err := watchOwner(s.data); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// appendFile appends text to the file at path.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Postgres) pgCtl(ctx context.Context, args ...string) error {
	all := append([]string{"-D", s.data, "-l", filepath.Join(s.dir, "postgres.log"), "-w", "-t", "60"}, args...)
	name, argv := s.asUser(filepath.Join(PGBinDir, "pg_ctl"), all...)
	return runLogged(ctx, 90*time.Second, name, argv...)
}

// URL implements Server; the database is postgres.
func (s *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// shutdownSignals are pg_ctl's shutdown modes, as the signals that ask
// the postmaster for them.
var shutdownSignals = map[string]syscall.Signal{"smart": syscall.SIGTERM, "fast": syscall.SIGINT, "immediate": syscall.SIGQUIT}

// Restart implements Server: the postmaster is shut down in mode's way
// (pg_ctl's modes: smart, fast, immediate) through a handle on it
// (findPostmaster), then started again as Start does; a server that is
// not running is started. Not pg_ctl restart: pg_ctl signals whatever
// process of the postgres user has the number written in postmaster.pid,
// and the file of a server killed with SIGKILL names, once the number is
// reused, another process: a PgBouncer of a test's own, a backend of the
// shared server.
func (s *Postgres) Restart(ctx context.Context, mode string) error {
	sig, ok := shutdownSignals[mode]
	if !ok {
		return fmt.Errorf("restart PostgreSQL: unknown shutdown mode %q (smart, fast or immediate)", mode)
	}
	if p := findPostmaster(s.data); p != nil {
		err := p.signal(sig)
		gone := err == nil && p.waitGone(60*time.Second) // pg_ctl's -t 60
		p.release()
		if err != nil {
			return fmt.Errorf("restart PostgreSQL (-m %s): %w", mode, err)
		}
		if !gone {
			return fmt.Errorf("restart PostgreSQL (-m %s): the server did not shut down within 60 s", mode)
		}
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("restart PostgreSQL (-m %s): %w", mode, err)
	}
	return nil
}

// Start starts a server stopped by Stop again, on its port and data. A
// postmaster.pid that names no process running in the data directory (a
// server killed with SIGKILL leaves its file) is removed first: the new
// postmaster would refuse to start while the number it names is a live
// process of the postgres user, whichever.
func (s *Postgres) Start(ctx context.Context) error {
	if pidFileNumber(s.data) != 0 && postmasterPID(s.data) == 0 {
		if err := os.Remove(filepath.Join(s.data, "postmaster.pid")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("start PostgreSQL: remove a stale postmaster.pid: %w", err)
		}
	}
	if err := s.pgCtl(ctx, "start"); err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	return nil
}

// pid reads the postmaster's PID from postmaster.pid (0 if it is gone).
func (s *Postgres) pid() int { return postmasterPID(s.data) }

// PID is the postmaster's process ID (0 once it is gone); its children are
// the server's other processes.
func (s *Postgres) PID() int { return s.pid() }

// Stop implements Server: SIGQUIT (immediate shutdown) to the
// postmaster, then SIGKILL if it is still there after 30 s, both through a
// handle on it (findPostmaster).
func (s *Postgres) Stop() error { return stopPostmaster(s.data, syscall.SIGQUIT, 30*time.Second) }

// MariaDB is a mariadbd of the caller's own, a child process of this one.
type MariaDB struct {
	dir, data string
	port      int
	opts      Options
	proc      *process
}

// StartMariaDB creates a datadir under dir with mariadb-install-db and
// starts mariadbd on it, on a free port and a socket of its own.
func StartMariaDB(ctx context.Context, dir string) (*MariaDB, error) {
	return StartMariaDBWith(ctx, dir, Options{})
}

// StartMariaDBWith is StartMariaDB with options. The server starts with
// --skip-grant-tables, so TrustNet changes nothing: every client is let in.
func StartMariaDBWith(ctx context.Context, dir string, o Options) (*MariaDB, error) {
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("start MariaDB: %s not found (install mariadb-server): %w", bin, err)
		}
	}
	s := &MariaDB{dir: dir, data: filepath.Join(dir, "mariadb"), opts: o}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	s.port = port
	// A temporary directory of its own: with the shared /tmp, a concurrent
	// server's install removed this one's temporary table files ("Could
	// not remove temporary table … error: 2", then "Unknown table
	// 'mysql.tmp_user_sys'") and the install failed.
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("start MariaDB: %w", err)
	}
	if err := runLogged(ctx, 2*time.Minute, "mariadb-install-db", "--no-defaults", "--datadir="+s.data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+filepath.Join(dir, "tmp")); err != nil {
		return nil, fmt.Errorf("start MariaDB: %w", err)
	}
	if err := s.start(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("start MariaDB: %w", err)
	}
	return s, nil
}

// start launches mariadbd and waits until it answers.
func (s *MariaDB) start(ctx context.Context) error {
	bin, _ := exec.LookPath("mariadbd")
	bind, flush := "127.0.0.1", "2"
	if s.opts.Listen != "" {
		bind += "," + s.opts.Listen
	}
	if s.opts.Durable {
		flush = "1"
	}
	cmd := exec.Command(bin, "--no-defaults", "--datadir="+s.data, "--user=root",
		"--port="+strconv.Itoa(s.port), "--bind-address="+bind,
		"--socket="+filepath.Join(s.dir, "mariadb.sock"), "--pid-file="+filepath.Join(s.dir, "mariadb.pid"),
		"--log-error="+filepath.Join(s.dir, "mariadb.err"), "--tmpdir="+filepath.Join(s.dir, "tmp"),
		"--skip-grant-tables", "--skip-log-bin",
		"--innodb-buffer-pool-size=128M", "--innodb-flush-log-at-trx-commit="+flush, "--max-connections=300")
	p, err := startProcess(cmd)
	if err != nil {
		return fmt.Errorf("mariadbd: %w", err)
	}
	s.proc = p
	return waitMySQL(ctx, p, s.port, filepath.Join(s.dir, "mariadb.err"), 90*time.Second,
		func(ctx context.Context, db *sql.DB) error { return db.PingContext(ctx) })
}

// URL implements Server; the database is mysql.
func (s *MariaDB) URL() string { return fmt.Sprintf("mysql://root@127.0.0.1:%d/mysql", s.port) }

// PID is mariadbd's process ID.
func (s *MariaDB) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// Restart implements Server: "clean" is SIGTERM and a wait for the
// shutdown, "kill" is kill -9; either way mariadbd starts again on the same
// datadir and port (after crash recovery, for "kill").
func (s *MariaDB) Restart(ctx context.Context, mode string) error {
	sig := syscall.SIGTERM
	if mode == "kill" {
		sig = syscall.SIGKILL
	}
	if err := s.signalAndWait(sig, 60*time.Second); err != nil {
		return fmt.Errorf("restart MariaDB (%s): %w", mode, err)
	}
	if err := s.start(ctx); err != nil {
		return fmt.Errorf("restart MariaDB (%s): %w", mode, err)
	}
	return nil
}

func (s *MariaDB) signalAndWait(sig syscall.Signal, wait time.Duration) error {
	if s.proc == nil {
		return nil
	}
	return s.proc.stop(sig, wait)
}

// Start starts a server stopped by Stop again, on its datadir and port.
func (s *MariaDB) Start(ctx context.Context) error {
	if err := s.start(ctx); err != nil {
		return fmt.Errorf("start MariaDB: %w", err)
	}
	return nil
}

// Stop implements Server.
func (s *MariaDB) Stop() error { return s.signalAndWait(syscall.SIGTERM, 30*time.Second) }

// PgBouncer is a pgbouncer of the caller's own in transaction mode, a child
// process of this one, in front of one upstream database.
type PgBouncer struct {
	port     int
	dir      string
	proc     *process
	stopping atomic.Bool // Stop was called while pgbouncer ran
}

// StartPgBouncer starts pgbouncer (pool_mode = transaction, trust
// authentication for users) on a free loopback port, with its files under
// dir, in front of database db at upstream (host:port); clients connect to
// database db on Port. A missing binary is an error, never a skip.
func StartPgBouncer(ctx context.Context, dir, upstream, db string, users ...string) (*PgBouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("start PgBouncer: pgbouncer not found (install Debian's pgbouncer; .ci/test does): %w", err)
	}
	host, upPort, err := net.SplitHostPort(upstream)
	if err != nil {
		return nil, fmt.Errorf("start PgBouncer: upstream %q: %w", upstream, err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	var auth strings.Builder
	for _, u := range users {
		fmt.Fprintf(&auth, "%q \"\"\n", u)
	}
	ini := fmt.Sprintf("[databases]\n%s = host=%s port=%s dbname=%s\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = %d\n"+
		"unix_socket_dir =\nauth_type = trust\nauth_file = %s\npool_mode = transaction\nmax_client_conn = 500\n"+
		"default_pool_size = 20\nlogfile = %s\n",
		db, host, upPort, db, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(auth.String()), 0o644); err != nil {
		return nil, fmt.Errorf("start PgBouncer: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return nil, fmt.Errorf("start PgBouncer: %w", err)
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		// pgbouncer refuses to run as root; -u switches to the postgres
		// user, which must be able to write its log.
		if err := chownToPostgres(dir, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.ini")); err != nil {
			return nil, fmt.Errorf("start PgBouncer: %w", err)
		}
		args = append([]string{"-u", "postgres"}, args...)
	}
	proc, err := startProcess(exec.Command(bin, args...))
	if err != nil {
		return nil, fmt.Errorf("start PgBouncer: %w", err)
	}
	s := &PgBouncer{port: port, dir: dir, proc: proc}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.proc.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return nil, fmt.Errorf("start PgBouncer: it exited: %s", strings.TrimSpace(string(log)))
		case <-ctx.Done():
			_ = s.Stop()
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			_ = s.Stop()
			return nil, fmt.Errorf("start PgBouncer: port %d did not open: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Port is the port clients connect to.
func (s *PgBouncer) Port() int { return s.port }

// Stop stops pgbouncer through its handle (SIGINT: shut down at once;
// killed if it has not after 10 s).
func (s *PgBouncer) Stop() error {
	select {
	case <-s.proc.exited: // gone already: Report says so
	default:
		s.stopping.Store(true)
	}
	return s.proc.stop(syscall.SIGINT, 10*time.Second)
}

// Report says, for a failed test's log, whether pgbouncer still runs or
// how it ended (its exit status or the signal that killed it, and whether
// Stop had been called), followed by its log file: in h-citime's CI run
// a PgBouncer went away mid-test and nothing kept why.
func (s *PgBouncer) Report() string {
	state := "running"
	select {
	case <-s.proc.exited:
		state = "exited (" + s.proc.cmd.ProcessState.String() + ") before Stop"
		if s.stopping.Load() {
			state = "stopped (" + s.proc.cmd.ProcessState.String() + ")"
		}
	default:
	}
	log, err := os.ReadFile(filepath.Join(s.dir, "pgbouncer.log"))
	if err != nil {
		return fmt.Sprintf("pgbouncer (pid %d, port %d) %s; its log: %v", s.proc.pid(), s.port, state, err)
	}
	return fmt.Sprintf("pgbouncer (pid %d, port %d) %s; its log:\n%s", s.proc.pid(), s.port, state, strings.TrimSpace(string(log)))
}
