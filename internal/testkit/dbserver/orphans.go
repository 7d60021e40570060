package dbserver

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// stopWhenOwnerExits is the script of a cluster's watcher. It reads its
// standard input to the end, which comes only when the process that
// started the cluster has exited (it alone holds the pipe's write end),
// and then stops the cluster if it still runs: the process named by
// postmaster.pid, while it runs in the data directory, as postmasterPID
// checks, before each signal (a number reused by another process since,
// even between the SIGQUIT and the SIGKILL, is left alone). SIGQUIT is
// PostgreSQL's immediate shutdown; SIGKILL follows after 30 s.
const stopWhenOwnerExits = `data=$1
cat >/dev/null
pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || exit 0
case "$pid" in ''|*[!0-9]*) exit 0 ;; esac
want=$(readlink -f "$data") && [ -n "$want" ] || exit 0
runs() { [ "$(readlink -f "/proc/$pid/cwd" 2>/dev/null)" = "$want" ]; }
runs || exit 0
kill -QUIT "$pid" 2>/dev/null || exit 0
n=0
while runs && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
runs && kill -KILL "$pid" 2>/dev/null
exit 0
`

// watchOwner starts the watcher that stops the cluster on data once this
// process has exited, whether or not it stopped the cluster itself. A test
// binary that go test stops at its -timeout, or that is killed, runs no
// cleanup: without the watcher its clusters (pg_ctl starts them detached
// from this process) would keep running, with their ports, memory and
// connections, on a machine whose next runs need them. The watcher is a
// shell in a process group of its own, so that a signal to the test's
// group leaves it to do its work. The pipe's write end stays open until
// this process exits: it is kept in watchedOwners, never closed, so that
// no finalizer closes it when the caller drops its *Postgres while the
// cluster is meant to run on.
func watchOwner(data string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watch the cluster's owner: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", stopWhenOwnerExits, "watch-owner", data)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("watch the cluster's owner: %w", err)
	}
	watchedMu.Lock()
	watchedOwners = append(watchedOwners, w)
	watchedMu.Unlock()
	// The watcher outlives this process by design; waiting for it only
	// reaps it should it end first.
	go func() { _ = cmd.Wait() }()
	return nil
}

var (
	watchedMu     sync.Mutex
	watchedOwners []*os.File // the watchers' pipes, open until this process exits
)
