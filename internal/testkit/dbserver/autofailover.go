package dbserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// AutoctlBin is where Debian's pg-auto-failover-cli installs pg_autoctl.
const AutoctlBin = "/usr/bin/pg_autoctl"

// FailoverTimeouts shorten how long pg_auto_failover takes to replace a
// lost primary. The defaults of pg_auto_failover 2.0 add up to about 50 s:
// the monitor marks a node unhealthy after 20 s without a successful health
// check, then waits primary_demote_timeout (30 s) for the old primary to
// demote itself before it promotes the standby; the old primary's keeper
// stops PostgreSQL after network_partition_timeout (20 s) without the
// monitor or the standby. Each timeout here is kept below the next, so
// that a partitioned primary always stops before another is promoted.
type FailoverTimeouts struct {
	// HealthCheckPeriod is how often the monitor checks every node.
	HealthCheckPeriod time.Duration
	// HealthCheckTimeout bounds one check's connection attempt.
	HealthCheckTimeout time.Duration
	// Unhealthy is how long without a keeper report or a successful check
	// before the monitor acts (node_considered_unhealthy_timeout).
	Unhealthy time.Duration
	// NetworkPartition is how long a primary's keeper waits, cut off from
	// the monitor and the standby, before it stops PostgreSQL.
	NetworkPartition time.Duration
	// PrimaryDemote is how long the monitor waits for a lost primary to
	// have stopped before it promotes the standby.
	PrimaryDemote time.Duration
}

// DefaultFailoverTimeouts are pg_auto_failover 2.0's own settings.
var DefaultFailoverTimeouts = FailoverTimeouts{
	HealthCheckPeriod:  5 * time.Second,
	HealthCheckTimeout: 5 * time.Second,
	Unhealthy:          20 * time.Second,
	NetworkPartition:   20 * time.Second,
	PrimaryDemote:      30 * time.Second,
}

// FastFailoverTimeouts trade false alarms (a primary paused for a few
// seconds is replaced) for a failover in about 10 s.
var FastFailoverTimeouts = FailoverTimeouts{
	HealthCheckPeriod:  time.Second,
	HealthCheckTimeout: time.Second,
	Unhealthy:          3 * time.Second,
	NetworkPartition:   3 * time.Second,
	PrimaryDemote:      5 * time.Second,
}

// AutoFailover is a pg_auto_failover formation of the caller's own: a
// monitor and two PostgreSQL nodes, a primary and a synchronous standby,
// each run by a pg_autoctl process under dir on a loopback port.
type AutoFailover struct {
	dir string
	// env is pg_autoctl's environment: its configuration and state files
	// (which it keeps under XDG directories, keyed by data directory) go
	// under dir, so they go with it.
	env      []string
	timeouts FailoverTimeouts
	asUser   func(bin string, args ...string) (string, []string)
	monitor  *autoctlNode
	nodes    []*autoctlNode
	mu       sync.Mutex // guards nodes' processes during a failover
}

// autoctlNode is one pg_autoctl-managed PostgreSQL instance.
type autoctlNode struct {
	name, pgdata string
	port         int
	proc         *process // nil while the node is down
}

// StartAutoFailover creates the monitor and two nodes and runs them, and
// returns once the formation has a primary and a synchronous standby.
// Missing packages are an error, never a skip.
func StartAutoFailover(ctx context.Context, dir string, t FailoverTimeouts) (_ *AutoFailover, err error) {
	if _, err := os.Stat(AutoctlBin); err != nil {
		return nil, fmt.Errorf("start pg_auto_failover: %s not found (install pg-auto-failover-cli and postgresql-15-auto-failover): %w", AutoctlBin, err)
	}
	s := &AutoFailover{dir: dir, timeouts: t, env: append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "xdg-config"), "XDG_DATA_HOME="+filepath.Join(dir, "xdg-data"))}
	if s.asUser, err = asPostgresUser(dir); err != nil {
		return nil, fmt.Errorf("start pg_auto_failover: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("start pg_auto_failover: %w", err), s.Stop())
		}
	}()

	monPort, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	s.monitor = &autoctlNode{name: "monitor", pgdata: filepath.Join(dir, "monitor"), port: monPort}
	if err := s.autoctl(ctx, "create", "monitor", "--pgdata", s.monitor.pgdata, "--pgport", strconv.Itoa(monPort),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", filepath.Join(PGBinDir, "pg_ctl")); err != nil {
		return nil, err
	}
	if err := s.run(s.monitor); err != nil {
		return nil, err
	}
	if err := s.configureMonitor(ctx); err != nil {
		return nil, err
	}
	for i := range 2 {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, err
		}
		n := &autoctlNode{name: "node" + strconv.Itoa(i+1), pgdata: filepath.Join(dir, "node"+strconv.Itoa(i+1)), port: port}
		if err := s.autoctl(ctx, "create", "postgres", "--pgdata", n.pgdata, "--pgport", strconv.Itoa(port),
			"--hostname", "127.0.0.1", "--name", n.name, "--auth", "trust", "--no-ssl",
			"--pgctl", filepath.Join(PGBinDir, "pg_ctl"), "--monitor", s.monitorURL("autoctl_node", "pg_auto_failover")); err != nil {
			return nil, err
		}
		if err := s.autoctl(ctx, "config", "set", "--pgdata", n.pgdata, "timeout.network_partition_timeout",
			strconv.Itoa(int(t.NetworkPartition.Seconds()))); err != nil {
			return nil, err
		}
		if err := s.run(n); err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
		want, ok := "node1 single", func(st map[string]string) bool { return st["node1"] == "single" }
		if i == 1 {
			want, ok = "node1 primary, node2 secondary", func(st map[string]string) bool {
				return st["node1"] == "primary" && st["node2"] == "secondary"
			}
		}
		if _, err := s.waitStates(ctx, 3*time.Minute, want, ok); err != nil {
			return nil, err
		}
	}
	if err := s.waitSync(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// waitSync waits until the primary replicates synchronously to the
// standby: a commit acknowledged from then on is on both nodes.
func (s *AutoFailover) waitSync(ctx context.Context, wait time.Duration) error {
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		primary, err := s.Primary(ctx)
		if err != nil || primary == "" {
			last = fmt.Errorf("no primary (%v)", err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, s.NodeURL(primary))
		if err == nil {
			var n int
			err = conn.QueryRow(cctx, "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')").Scan(&n)
			_ = conn.Close(context.Background())
			if err == nil && n == 0 {
				err = fmt.Errorf("%s has no synchronous standby", primary)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no synchronous replication after %s: %v", wait, last)
}

// autoctl runs a pg_autoctl command to its end.
func (s *AutoFailover) autoctl(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	name, argv := s.asUser(AutoctlBin, args...)
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_autoctl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// run starts pg_autoctl run for a node, in a process group of its own (its
// supervisor, keeper and PostgreSQL), logging to the node's directory.
func (s *AutoFailover) run(n *autoctlNode) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	name, argv := s.asUser(AutoctlBin, "run", "--pgdata", n.pgdata)
	cmd := exec.Command(name, argv...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if n.proc, err = startProcess(cmd); err != nil {
		return fmt.Errorf("pg_autoctl run %s: %w", n.name, err)
	}
	return nil
}

// monitorURL is a URL of the monitor's database as user.
func (s *AutoFailover) monitorURL(user, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, s.monitor.port, db)
}

// configureMonitor applies the failover timeouts to the monitor, once it
// answers.
func (s *AutoFailover) configureMonitor(ctx context.Context) error {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	set := map[string]string{
		"pgautofailover.health_check_period":               ms(s.timeouts.HealthCheckPeriod),
		"pgautofailover.health_check_timeout":              ms(s.timeouts.HealthCheckTimeout),
		"pgautofailover.node_considered_unhealthy_timeout": ms(s.timeouts.Unhealthy),
		"pgautofailover.primary_demote_timeout":            ms(s.timeouts.PrimaryDemote),
	}
	return s.withMonitor(ctx, 2*time.Minute, func(conn *pgx.Conn) error {
		for k, v := range set {
			if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+k+" = "+v); err != nil {
				return fmt.Errorf("set %s: %w", k, err)
			}
		}
		_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	})
}

// withMonitor connects to the monitor as postgres, retrying until it
// answers or wait has passed, and runs f.
func (s *AutoFailover) withMonitor(ctx context.Context, wait time.Duration, f func(*pgx.Conn) error) error {
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, s.monitorURL("postgres", "pg_auto_failover"))
		cancel()
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		err = f(conn)
		_ = conn.Close(context.Background())
		return err
	}
	return fmt.Errorf("monitor does not answer: %w", last)
}

// States returns each node's state as the monitor last heard it reported.
func (s *AutoFailover) States(ctx context.Context) (map[string]string, error) {
	states := map[string]string{}
	err := s.withMonitor(ctx, 30*time.Second, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, "SELECT nodename, reportedstate::text FROM pgautofailover.node")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, state string
			if err := rows.Scan(&name, &state); err != nil {
				return err
			}
			states[name] = state
		}
		return rows.Err()
	})
	return states, err
}

// waitStates waits until the nodes' states, as the monitor last heard
// them, satisfy ok (want says what that is, for the error), and returns
// them.
func (s *AutoFailover) waitStates(ctx context.Context, wait time.Duration, want string, ok func(map[string]string) bool) (map[string]string, error) {
	var got map[string]string
	var err error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if got, err = s.States(ctx); err == nil && ok(got) {
			return got, nil
		}
	}
	return nil, fmt.Errorf("nodes are %v after %s, want %s (last error: %v; logs in %s)", got, wait, want, err, s.dir)
}

// nodeIn names a node whose state is one of want, "" if none is.
func nodeIn(states map[string]string, want ...string) string {
	for name, st := range states {
		if slices.Contains(want, st) {
			return name
		}
	}
	return ""
}

// primaryOf names the node in states that is primary (or wait_primary, a
// primary without a standby), "" if none.
func primaryOf(states map[string]string) string { return nodeIn(states, "primary", "wait_primary") }

// URL implements Server: both nodes, for a client that finds the primary
// (target_session_attrs=read-write); the database is postgres.
func (s *AutoFailover) URL() string {
	hosts := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// NodeURL is a URL of one node alone.
func (s *AutoFailover) NodeURL(name string) string {
	for _, n := range s.nodes {
		if n.name == name {
			return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.port)
		}
	}
	return ""
}

// Primary returns the name of the node the monitor knows as primary (or
// wait_primary, a primary without a standby), "" if none.
func (s *AutoFailover) Primary(ctx context.Context) (string, error) {
	states, err := s.States(ctx)
	return primaryOf(states), err
}

// Restart implements Server. Mode "failover" kills the primary's whole
// node with SIGKILL (pg_autoctl, its keeper and PostgreSQL: a lost
// machine), waits until the monitor has promoted the standby, then starts
// the lost node again, which rejoins as the new standby in the background
// (pg_rewind); a later failover first waits for it.
func (s *AutoFailover) Restart(ctx context.Context, mode string) error {
	if mode != "failover" {
		return fmt.Errorf("pg_auto_failover: restart mode %q: only failover", mode)
	}
	_, err := s.Failover(ctx)
	return err
}

// Failover is Restart("failover"), returning when the primary's node was
// killed: it first waits for the formation to have a synchronous standby.
func (s *AutoFailover) Failover(ctx context.Context) (killed time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	states, err := s.waitStates(ctx, 5*time.Minute, "a primary and a secondary", func(st map[string]string) bool {
		return nodeIn(st, "primary") != "" && nodeIn(st, "secondary") != ""
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("failover: formation not ready: %w", err)
	}
	if err := s.waitSync(ctx, 2*time.Minute); err != nil {
		return time.Time{}, fmt.Errorf("failover: %w", err)
	}
	old := nodeIn(states, "primary")
	n := s.node(old)
	killed = time.Now()
	if err := n.kill(); err != nil {
		return killed, fmt.Errorf("failover: kill %s: %w", n.name, err)
	}
	if _, err := s.waitStates(ctx, 5*time.Minute, "a primary other than "+old, func(st map[string]string) bool {
		p := primaryOf(st)
		return p != "" && p != old
	}); err != nil {
		return killed, fmt.Errorf("failover: %w", err)
	}
	return killed, s.run(n)
}

func (s *AutoFailover) node(name string) *autoctlNode {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// kill sends SIGKILL to the node's process group and to its postmaster,
// should it have left the group, and waits for pg_autoctl to be gone.
func (n *autoctlNode) kill() error {
	if n.proc == nil {
		return nil
	}
	_ = syscall.Kill(-n.proc.pid(), syscall.SIGKILL)
	if p := findPostmaster(n.pgdata); p != nil {
		_ = p.signal(syscall.SIGKILL)
		p.release()
	}
	select {
	case <-n.proc.exited:
	case <-time.After(30 * time.Second):
		return errors.New("pg_autoctl still running 30 s after SIGKILL")
	}
	n.proc = nil
	return nil
}

// Stop implements Server: every node, then the monitor, stopped with
// SIGKILL to their process groups (the directory is thrown away).
func (s *AutoFailover) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, n := range append(append([]*autoctlNode{}, s.nodes...), s.monitor) {
		if n != nil {
			errs = append(errs, n.kill())
		}
	}
	return errors.Join(errs...)
}
