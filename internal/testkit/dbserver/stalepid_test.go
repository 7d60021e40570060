package dbserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestStalePIDFileNamesAnotherProcess: a postmaster.pid left by a server
// killed with SIGKILL names, once the number is reused, another process of
// the postgres user (a PgBouncer of a test's own, a backend of the shared
// server). Start, Restart and Stop must leave that process alone and start
// or stop the server as asked. pg_ctl restart signalled it (and then said
// the server did not shut down), and the postmaster refused to start while
// it lived.
func TestStalePIDFileNamesAnotherProcess(t *testing.T) {
	ctx := context.Background()
	// Under /tmp itself: when this test runs as root, the cluster runs as
	// postgres, which cannot enter t.TempDir's parent.
	dir, err := os.MkdirTemp("", "spool-stale-pid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := StartPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	// The other process: one pg_ctl may signal (the postgres user's, when
	// this test runs as root), not running in the data directory.
	decoy := exec.Command("sleep", "600")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		decoy.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	decoyExited := make(chan struct{})
	go func() {
		_ = decoy.Wait()
		close(decoyExited)
	}()
	t.Cleanup(func() {
		_ = decoy.Process.Kill()
		<-decoyExited
	})
	// Each step stops the server with SIGKILL's aftermath: the postmaster
	// gone, its postmaster.pid naming the decoy.
	staleFile := func() {
		t.Helper()
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		pidFile := filepath.Join(s.data, "postmaster.pid")
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(decoy.Process.Pid)+"\n"+s.data+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := chownToPostgres(pidFile); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, mode := range []string{"fast", "immediate"} {
		staleFile()
		if err := s.Restart(ctx, mode); err != nil {
			t.Errorf("restart (%s) over a postmaster.pid naming another process: %v", mode, err)
		} else if pid := s.PID(); pid <= 0 || pid == decoy.Process.Pid {
			t.Errorf("restarted (%s) server's postmaster: %d (decoy %d)", mode, pid, decoy.Process.Pid)
		}
	}
	staleFile()
	if err := s.Start(ctx); err != nil {
		t.Errorf("start over a postmaster.pid naming another process: %v", err)
	} else if pid := s.PID(); pid <= 0 || pid == decoy.Process.Pid {
		t.Errorf("started server's postmaster: %d (decoy %d)", pid, decoy.Process.Pid)
	}
	staleFile()
	if err := s.Stop(); err != nil {
		t.Error(err)
	}

	// The decoy dies of this test's SIGTERM, not of a signal sent before.
	if err := decoy.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-decoyExited
	ws, ok := decoy.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the process named by the stale postmaster.pid was signalled by the server's restart, start or stop: %v", decoy.ProcessState)
	}
}

// TestPgBouncerReport: a PgBouncer that goes away before its Stop (here
// by a SIGTERM from outside the harness) is reported so, with the way it
// ended and its log; one stopped by Stop is reported stopped.
func TestPgBouncerReport(t *testing.T) {
	ctx := context.Background()
	start := func() *PgBouncer {
		t.Helper()
		// Under /tmp itself: pgbouncer runs as postgres when the test runs
		// as root.
		dir, err := os.MkdirTemp("", "spool-pgbouncer-report-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		b, err := StartPgBouncer(ctx, dir, "127.0.0.1:5432", "test", "postgres")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Stop() })
		return b
	}
	gone := start()
	if err := gone.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil { // not through Stop
		t.Fatal(err)
	}
	<-gone.proc.exited
	_ = gone.Stop()
	if r := gone.Report(); !strings.Contains(r, "before Stop") || !strings.Contains(r, "SIGTERM") {
		t.Errorf("a PgBouncer killed from outside, reported as:\n%s", r)
	}
	stopped := start()
	if err := stopped.Stop(); err != nil {
		t.Fatal(err)
	}
	if r := stopped.Report(); !strings.HasPrefix(r, fmt.Sprintf("pgbouncer (pid %d, port %d) stopped (", stopped.proc.pid(), stopped.Port())) {
		t.Errorf("a PgBouncer stopped by Stop, reported as:\n%s", r)
	}
}
