package dbserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a server process of this package's own, watched until it
// exits.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
}

// startProcess starts cmd, to be killed with this process (Pdeathsig)
// unless cmd asks otherwise.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid is the process's ID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends sig and waits up to wait for the process to exit, then kills
// it, returning an error that says so.
func (p *process) stop(sig syscall.Signal, wait time.Duration) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not exit within %s of %s; killed", filepath.Base(p.cmd.Path), wait, sig)
	}
}

// waitMySQL waits until the mariadbd p, listening on port, passes ready,
// or until wait has passed; it fails at once if p exits (errLog is its
// error log, named in the error).
func waitMySQL(ctx context.Context, p *process, port int, errLog string, wait time.Duration, ready func(context.Context, *sql.DB) error) error {
	// The driver is linked by the caller (backend/mysql imports it): this
	// module does not import it, so that modules requiring it for their
	// tests list no MySQL driver.
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", port))
	if err != nil {
		return fmt.Errorf("wait for mariadbd (the test must link github.com/go-sql-driver/mysql, as backend/mysql does): %w", err)
	}
	defer db.Close()
	var last error
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		select {
		case <-p.exited:
			return fmt.Errorf("mariadbd exited at start (log %s):\n%s", errLog, logErrors(errLog, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(qctx, db)
		cancel()
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("mariadbd on port %d not ready after %s: %w", port, wait, last)
}

// logErrors returns the last n lines of a server's log that report an
// error or a failure (the last n lines if none do), so that a start that
// failed on a machine since gone says why in the test's output.
func logErrors(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var picked []string
	for _, l := range lines {
		if strings.Contains(l, "[ERROR]") || strings.Contains(l, "FATAL") || strings.Contains(l, "failed") || strings.Contains(l, "Failed") {
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 {
		picked = lines
	}
	if len(picked) > n {
		picked = picked[len(picked)-n:]
	}
	return strings.Join(picked, "\n")
}

// postmasterPID reads a data directory's postmaster.pid: the number of the
// process that runs there, 0 if the file is absent or names no process
// running in pgdata.
func postmasterPID(pgdata string) int {
	pid := pidFileNumber(pgdata)
	if pid <= 0 || !runsIn(pid, pgdata) {
		return 0
	}
	return pid
}

// pidFileNumber is the number on the first line of pgdata's
// postmaster.pid (0 if absent), whatever process it names.
func pidFileNumber(pgdata string) int {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// postmaster is a handle on the postmaster running in a data directory:
// every signal goes through it, never through the number alone.
type postmaster struct {
	proc   *os.Process
	pgdata string
}

// findPostmaster returns a handle on the postmaster running in pgdata, or
// nil if postmaster.pid names no process running there. The handle is
// taken before the check that its process runs in pgdata: on Linux it is
// a pidfd, which names that one process for as long as it is held, so a
// number that the postmaster's exit frees and another process takes (the
// pid range is 32,768) cannot turn a signal meant for the postmaster
// into one for that process. Where the kernel has no pidfd, signal checks
// again before each signal, which leaves only the moment between the two.
func findPostmaster(pgdata string) *postmaster {
	pid := pidFileNumber(pgdata)
	if pid <= 0 {
		return nil
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if !runsIn(pid, pgdata) {
		_ = proc.Release()
		return nil
	}
	return &postmaster{proc: proc, pgdata: pgdata}
}

// running reports whether the postmaster still runs (in its data
// directory: an exited one, even unreaped, has none).
func (p *postmaster) running() bool {
	return p.proc.Signal(syscall.Signal(0)) == nil && runsIn(p.proc.Pid, p.pgdata)
}

// signal sends sig to the postmaster; one that has exited is not an error.
func (p *postmaster) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := p.proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postmaster %d: %w", p.proc.Pid, err)
	}
	return nil
}

// waitGone waits up to wait for the postmaster to exit, reporting whether
// it did.
func (p *postmaster) waitGone(wait time.Duration) bool {
	for deadline := time.Now().Add(wait); p.running(); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// release lets the handle go.
func (p *postmaster) release() { _ = p.proc.Release() }

// stopPostmaster stops the postmaster running in pgdata, if one does:
// sig, then SIGKILL if it has not exited after wait.
func stopPostmaster(pgdata string, sig syscall.Signal, wait time.Duration) error {
	p := findPostmaster(pgdata)
	if p == nil {
		return nil
	}
	defer p.release()
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("stop server: %w", err)
	}
	if p.waitGone(wait) {
		return nil
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill server: %w", err)
	}
	return nil
}

// runsIn reports whether process pid runs with dir as its working
// directory, as a postmaster does in its data directory. A postmaster
// killed with SIGKILL leaves its postmaster.pid behind, and on a machine
// whose pid range is small (32,768) the number soon names another
// process: a signal meant for the dead server would go to it (a stop after
// a kill -9 fault took down another test's server that way).
func runsIn(pid int, dir string) bool {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	want, err = filepath.Abs(want)
	return err == nil && cwd == want
}
