package scenarios

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPinHostsKeepsAChildServerOnItsCPU: a server that runs as the
// pinned process's child (as mariadbd runs under lab hosts) stays on the
// server's CPU, and the process on the workers'.
func TestPinHostsKeepsAChildServerOnItsCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Fatalf("--pin needs 2 CPUs; this machine has %d", runtime.NumCPU())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// self plays the lab process, its child sleep the server; self
	// prints the child's pid once it has started it.
	self := exec.CommandContext(ctx, "sh", "-c", "sleep 60 & echo $!; wait")
	out, err := self.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = self.Process.Kill(); _ = self.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child's pid: %v", err)
	}
	server, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child's pid %q: %v", line, err)
	}
	if err := pinHosts(ctx, self.Process.Pid, server, "1", "0"); err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[int]string{server: "0", self.Process.Pid: "1"} {
		if got := cpusAllowed(t, pid); got != want {
			t.Errorf("process %d (server %d) allowed on CPUs %q, want %q", pid, server, got, want)
		}
	}
}

// cpusAllowed is the Cpus_allowed_list of a process.
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in /proc/%d/status", pid)
	return ""
}
