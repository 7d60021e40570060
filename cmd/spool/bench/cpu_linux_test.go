//go:build linux

package bench

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestTreeFaults: a child that touches fresh memory adds its minor faults
// to its parent's tree, and the count reads only that tree.
func TestTreeFaults(t *testing.T) {
	// The child is a shell that waits on its stdin: this process's child,
	// with nothing of its own touched yet but what the shell starts with.
	cmd := exec.Command("sh", "-c", "read _")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
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
