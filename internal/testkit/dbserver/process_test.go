package dbserver

import (
	"os"
	"path/filepath"
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
