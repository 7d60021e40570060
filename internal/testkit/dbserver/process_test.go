package dbserver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLogErrors: a failed start reports the log's error lines, or its last
// lines when none is marked as an error.
func TestLogErrors(t *testing.T) {
	dir := t.TempDir()
	marked := filepath.Join(dir, "marked.err")
	if err := os.WriteFile(marked, []byte("note one\n[ERROR] WSREP: bind: Address already in use\nnote two\n[ERROR] Aborting\nnote three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := logErrors(marked, 20), "[ERROR] WSREP: bind: Address already in use\n[ERROR] Aborting"; got != want {
		t.Errorf("marked log: got %q, want %q", got, want)
	}
	plain := filepath.Join(dir, "plain.err")
	if err := os.WriteFile(plain, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := logErrors(plain, 2), "b\nc"; got != want {
		t.Errorf("plain log: got %q, want %q", got, want)
	}
	if got := logErrors(filepath.Join(dir, "absent"), 2); !strings.Contains(got, "no such file") {
		t.Errorf("absent log: got %q", got)
	}
}

// TestFreeLoopbackPortDistinct: ports handed out are distinct and outside
// the kernel's ephemeral range, so neither a second pick nor an outgoing
// connection takes one before its server binds it.
func TestFreeLoopbackPortDistinct(t *testing.T) {
	low, high := serverPortRange()
	seen := map[int]bool{}
	for range 300 {
		p, err := freeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if high-low >= 1000 && (p < low || p >= high) {
			t.Fatalf("port %d outside [%d, %d)", p, low, high)
		}
	}
}

// TestPortReservedAcrossProcesses: a port another process picked is not
// handed out while that process lives, even once nothing listens on it (a
// server of its own between a stop and a restart), and is free again
// once it has exited.
func TestPortReservedAcrossProcesses(t *testing.T) {
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), "SPOOL_TEST_HOLD_PORT=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read the child's port: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "port "))
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	reserve := func() bool {
		portsMu.Lock()
		defer portsMu.Unlock()
		return reservePort(port)
	}
	if reserve() {
		t.Fatalf("port %d reserved here while the process that picked it lives", port)
	}
	_ = stdin.Close()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if !reserve() {
		t.Fatalf("port %d still held after its process exited", port)
	}
}

// TestMain runs holdPort instead of the tests in the child that
// TestPortReservedAcrossProcesses starts, and orphanCluster in the one
// TestClusterStopsWhenOwnerDies starts.
func TestMain(m *testing.M) {
	if os.Getenv("SPOOL_TEST_HOLD_PORT") == "1" {
		holdPort()
		return
	}
	if dir := os.Getenv("SPOOL_TEST_ORPHAN_CLUSTER"); dir != "" {
		orphanCluster(dir)
		return
	}
	os.Exit(m.Run())
}

// holdPort is TestPortReservedAcrossProcesses's other process: it picks a
// port, says which, and holds it until its standard input closes.
func holdPort() {
	port, err := freeLoopbackPort()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("port %d\n", port)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestPostmasterPIDStale: a postmaster.pid whose process does not run in
// the data directory (the server was killed and the number reused) names
// no postmaster; one whose process does, names it.
func TestPostmasterPIDStale(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "postmaster.pid")
	// This test's own process: alive, but not running in dir.
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := postmasterPID(dir); pid != 0 {
		t.Fatalf("stale pid file: got pid %d, want 0", pid)
	}
	// A process that runs in dir.
	cmd := exec.Command("sleep", "30")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := postmasterPID(dir); pid != cmd.Process.Pid {
		t.Fatalf("live pid file: got pid %d, want %d", pid, cmd.Process.Pid)
	}
}
