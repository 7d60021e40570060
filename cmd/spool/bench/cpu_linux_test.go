//go:build linux

package bench

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTreeFaults: a child that touches fresh memory adds its minor faults
// to its parent's tree, and the count reads only that tree.
func TestTreeFaults(t *testing.T) {
	// The child is a shell that waits on its stdin: this process's child,
	// with nothing of its own touched yet but what the shell starts with.
	cmd := exec.Command("sh", "-c", "read _")
	startUntilCleanup(t, cmd)
	before, ok := TreeFaults(os.Getpid())
	if !ok || before <= 0 {
		t.Fatalf("faults of this process and its child: %d, %v; want some", before, ok)
	}
	// 16 MiB touched page by page: 4,096 pages of 4 KiB, each a minor
	// fault unless the kernel backs it with a huge page.
	buf := make([]byte, 16<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, _ := TreeFaults(os.Getpid())
	if after <= before {
		t.Fatalf("faults %d before touching 16 MiB, %d after: want more", before, after)
	}
	if child, _ := TreeFaults(cmd.Process.Pid); child <= 0 || child >= after {
		t.Fatalf("the child's tree counts %d faults, this process's %d: want the child's alone, fewer", child, after)
	}
}

// TestServerPIDsEnv: with ServerPIDsEnv set, takeServerCPU reads the
// processes it lists, whatever their name, and no other.
func TestServerPIDsEnv(t *testing.T) {
	self := os.Getpid()
	t.Setenv(ServerPIDsEnv, strconv.Itoa(self))
	s, ok := takeServerCPU()
	if _, has := s[self]; !ok || !has || len(s) != 1 {
		t.Fatalf("snapshot %v (ok %v), want this process alone", s, ok)
	}
}

// burnEnv, set in the child of TestTreeCPUThreads, makes this test binary
// spin on two threads other than its main one until its stdin closes,
// then exit before any test runs: its CPU is spent as a mariadbd's is, on
// threads other than the first.
const burnEnv = "SPOOL_BENCH_TEST_BURN_THREADS"

func init() {
	if os.Getenv(burnEnv) == "" {
		return
	}
	// The main goroutine keeps the main thread, so the spinning
	// goroutines run on others.
	runtime.LockOSThread()
	var stop atomic.Bool
	for range 2 {
		go func() {
			for !stop.Load() {
			}
		}()
	}
	_, _ = io.ReadAll(os.Stdin)
	stop.Store(true)
	os.Exit(0)
}

// TestTreeCPUThreads: the CPU a process spends on threads other than its
// first counts in TreeCPU (a mariadbd's connections run on threads of
// their own; /proc/PID/schedstat is the first thread's alone).
func TestTreeCPUThreads(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), burnEnv+"=1")
	startUntilCleanup(t, cmd)
	// Wait until the child has used 300 ms of CPU, as its stat line
	// counts it (every thread's), whatever the machine's load.
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if ticks, ok := statTicks(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])); ok && ticks >= 30 {
			break
		}
		runtime.Gosched()
	}
	got, ok := TreeCPU(cmd.Process.Pid)
	if !ok || got < 250*time.Millisecond {
		t.Fatalf("TreeCPU of a child that spent 300 ms on its other threads: %v (ok %v), want at least 250 ms", got, ok)
	}
}

// startUntilCleanup starts cmd, a child that runs until its stdin closes,
// and closes its stdin and waits for it when the test ends.
func startUntilCleanup(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
}
