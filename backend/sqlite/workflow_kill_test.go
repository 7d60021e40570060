//go:build unix

package sqlite_test

import (
	"os"
	"testing"

	"github.com/spoolq/spool/conformance"
)

// TestWorkflowUnderKills runs conformance.WorkflowUnderKills on a file of
// its own (a process stopped inside a write holds the file's write lock
// while it is stopped: the others wait, and the stall is credited to the
// leases).
func TestWorkflowUnderKills(t *testing.T) {
	if dsn := os.Getenv(conformance.WorkflowChildEnv); dsn != "" {
		conformance.RunWorkflowChild(dsn)
		return
	}
	if testing.Short() {
		t.Skip("starts worker processes for about 10 s")
	}
	be := newBackend(t, nil)
	conformance.WorkflowUnderKills(t, be, "TestWorkflowUnderKills", "sqlite://"+be.Path())
}
