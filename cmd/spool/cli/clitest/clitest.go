// Package clitest runs spool command lines in-process, for the tests of the
// command and its parts.
package clitest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/conformance"
)

// Exec runs a command line on env and returns its exit code, as the spool
// binary's main does.
type Exec func(ctx context.Context, env *cli.Env, args []string) int

// Result is what one command line produced.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs args through exec with stdin as standard input (nil: empty) and
// buffers for the outputs, and logs the outcome.
func Run(t testing.TB, exec Exec, stdin io.Reader, args ...string) Result {
	t.Helper()
	var stdout, stderr conformance.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := exec(ctx, &cli.Env{Stdin: stdin, Stdout: &stdout, Stderr: &stderr}, args)
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
	t.Logf("spool %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	return r
}

// MustRun is Run that fails the test unless the command exits 0.
func MustRun(t testing.TB, exec Exec, args ...string) Result {
	t.Helper()
	r := Run(t, exec, nil, args...)
	if r.Code != 0 {
		t.Fatalf("spool %s: exit %d, stderr: %s", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return r
}
