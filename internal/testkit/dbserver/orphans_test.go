package dbserver

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterStopsWhenOwnerDies: a cluster whose starting process is
// killed (as go test kills a test binary at its -timeout, with no cleanup
// run) is stopped by its watcher; a cluster stopped and started again by a
// live owner is left alone.
func TestClusterStopsWhenOwnerDies(t *testing.T) {
	// Directories under /tmp itself: when this test runs as root, the
	// cluster runs as postgres, which cannot enter t.TempDir's parent.
	tempDir := func() string {
		dir, err := os.MkdirTemp("", "spool-orphan-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	dir := tempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "SPOOL_TEST_ORPHAN_CLUSTER="+dir)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		t.Fatalf("read the child's postmaster: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "postmaster "))
	if err != nil {
		_ = child.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	data := dir + "/pgdata"
	t.Cleanup(func() { // if the watcher failed, stop the cluster here
		_ = stopPostmaster(data, syscall.SIGQUIT, 30*time.Second)
	})
	if postmasterPID(data) != pid {
		t.Fatalf("postmaster %d is not running in %s", pid, data)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	// The watcher gives SIGQUIT and then, 30 s on, SIGKILL: a minute
	// bounds a watcher that never acts, not its speed.
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d still runs a minute after the process that started it was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A live owner's cluster, stopped and started again, is not touched:
	// the watcher acts on its owner's exit only.
	s, err := StartPostgres(context.Background(), tempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.PID() <= 0 {
		t.Fatal("restarted cluster not running")
	}
}

// orphanCluster is TestClusterStopsWhenOwnerDies's other process: it
// starts a cluster under dir, says its postmaster's PID, and waits to be
// killed.
func orphanCluster(dir string) {
	s, err := StartPostgres(context.Background(), dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("postmaster %d\n", s.PID())
	select {}
}
