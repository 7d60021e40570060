package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// GaleraProvider is where Debian's galera-4 package installs the provider.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// Galera is a MariaDB Galera cluster of the caller's own: nodes on loopback
// ports under one directory, joined by state transfers with rsync.
type Galera struct {
	dir   string
	nodes []*galeraNode
}

type galeraNode struct {
	name, data            string
	port, gcomm, ist, sst int
	cmd                   *exec.Cmd
	exited                chan struct{}
}

// StartGalera creates n datadirs in a temporary directory of its own and
// starts a cluster: the first node bootstraps it and each other joins in
// turn (a full state transfer by rsync, whose daemon cannot run as root: so
// mariadbd runs as the mysql OS user, which must be able to reach the
// directory; a test's own temporary directory is private to root). It
// returns once every node reports itself synced in a cluster of n. Stop
// removes the directory; a failed start leaves it for its logs.
func StartGalera(ctx context.Context, n int) (_ *Galera, err error) {
	if n < 1 {
		return nil, fmt.Errorf("start Galera: %d nodes", n)
	}
	if _, err := os.Stat(GaleraProvider); err != nil {
		return nil, fmt.Errorf("start Galera: %s not found (install galera-4): %w", GaleraProvider, err)
	}
	for _, bin := range []string{"mariadb-install-db", "mariadbd", "rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("start Galera: %s not found (install mariadb-server, galera-4 and rsync): %w", bin, err)
		}
	}
	owner, err := user.Lookup("mysql")
	if err != nil {
		return nil, fmt.Errorf("start Galera: needs the mysql OS user: %w", err)
	}
	dir, err := os.MkdirTemp("", "spool-galera-")
	if err != nil {
		return nil, fmt.Errorf("start Galera: %w", err)
	}
	s := &Galera{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("start Galera (logs in %s): %w", dir, err), s.stop())
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for i := range n {
		g := &galeraNode{name: "n" + strconv.Itoa(i+1), data: filepath.Join(dir, "n"+strconv.Itoa(i+1))}
		for _, p := range []*int{&g.port, &g.gcomm, &g.ist, &g.sst} {
			if *p, err = freeLoopbackPort(); err != nil {
				return nil, err
			}
		}
		if err := runLogged(ctx, 2*time.Minute, "mariadb-install-db", "--no-defaults", "--datadir="+g.data,
			"--user=mysql", "--auth-root-authentication-method=normal", "--skip-test-db"); err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, g)
	}
	if err := chownTree(dir, owner); err != nil {
		return nil, err
	}
	members := make([]string, n)
	for i, g := range s.nodes {
		members[i] = fmt.Sprintf("127.0.0.1:%d", g.gcomm)
	}
	for i, g := range s.nodes {
		address := "gcomm://" + strings.Join(members, ",")
		var extra []string
		if i == 0 {
			address, extra = "gcomm://", []string{"--wsrep-new-cluster"}
		}
		if err := s.start(g, address, extra...); err != nil {
			return nil, err
		}
		if err := s.waitSynced(ctx, g, i+1, 3*time.Minute); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// chownTree gives every file under dir to the OS user u.
func chownTree(dir string, u *user.User) error {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// start launches one node's mariadbd.
func (s *Galera) start(g *galeraNode, address string, extra ...string) error {
	bin, _ := exec.LookPath("mariadbd")
	args := append([]string{"--no-defaults", "--datadir=" + g.data, "--user=mysql",
		"--port=" + strconv.Itoa(g.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.dir, g.name+".sock"), "--pid-file=" + filepath.Join(s.dir, g.name+".pid"),
		"--log-error=" + filepath.Join(s.dir, g.name+".err"), "--skip-grant-tables",
		"--innodb-buffer-pool-size=64M", "--max-connections=300",
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
		"--wsrep-on=ON", "--wsrep-provider=" + GaleraProvider, "--wsrep-cluster-name=spool",
		"--wsrep-cluster-address=" + address, "--wsrep-node-address=127.0.0.1", "--wsrep-node-name=" + g.name,
		fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;base_port=%d", g.gcomm, g.ist, g.gcomm),
		"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", g.sst)}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mariadbd %s: %w", g.name, err)
	}
	g.cmd, g.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(g.exited)
	}()
	return nil
}

// waitSynced waits until node g answers, is synced, and sees a cluster of
// size nodes.
func (s *Galera) waitSynced(ctx context.Context, g *galeraNode, size int, wait time.Duration) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", g.port)
	cfg.Timeout = time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		select {
		case <-g.exited:
			return fmt.Errorf("mariadbd %s exited at start (see %s)", g.name, filepath.Join(s.dir, g.name+".err"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		var state string
		var got int
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = db.QueryRowContext(qctx, `SELECT
  (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
  (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE')`).Scan(&state, &got)
		cancel()
		if last == nil && (state != "Synced" || got != size) {
			last = fmt.Errorf("state %s, cluster size %d", state, got)
		}
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("galera node %s not synced in a cluster of %d after %s: %w", g.name, size, wait, last)
}

// Len is the number of nodes.
func (s *Galera) Len() int { return len(s.nodes) }

// NodeURL is a mysql:// URL of node i (from 0); the database is mysql.
func (s *Galera) NodeURL(i int) string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/mysql", s.nodes[i].port)
}

// Stop stops every node (SIGTERM, then SIGKILL after 30 s) and removes the
// directory.
func (s *Galera) Stop() error {
	return errors.Join(s.stop(), os.RemoveAll(s.dir))
}

func (s *Galera) stop() error {
	var errs []error
	for i := len(s.nodes) - 1; i >= 0; i-- {
		g := s.nodes[i]
		if g.cmd == nil {
			continue
		}
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(30 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.exited
			errs = append(errs, fmt.Errorf("galera node %s did not stop within 30 s; killed", g.name))
		}
		g.cmd = nil
	}
	return errors.Join(errs...)
}
