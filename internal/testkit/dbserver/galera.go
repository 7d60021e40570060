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
	proc                  *process
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
	p, err := startProcess(exec.Command(bin, args...))
	if err != nil {
		return fmt.Errorf("mariadbd %s: %w", g.name, err)
	}
	g.proc = p
	return nil
}

// waitSynced waits until node g answers, is synced, and sees a cluster of
// size nodes.
func (s *Galera) waitSynced(ctx context.Context, g *galeraNode, size int, wait time.Duration) error {
	return waitMySQL(ctx, g.proc, g.port, filepath.Join(s.dir, g.name+".err"), wait, func(ctx context.Context, db *sql.DB) error {
		var state string
		var got int
		err := db.QueryRowContext(ctx, `SELECT
  (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
  (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE')`).Scan(&state, &got)
		if err == nil && (state != "Synced" || got != size) {
			err = fmt.Errorf("galera node %s: state %s, cluster size %d, want Synced in %d", g.name, state, got, size)
		}
		return err
	})
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
		if g := s.nodes[i]; g.proc != nil {
			errs = append(errs, g.proc.stop(syscall.SIGTERM, 30*time.Second))
			g.proc = nil
		}
	}
	return errors.Join(errs...)
}
