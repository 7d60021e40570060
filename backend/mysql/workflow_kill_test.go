//go:build unix

package mysql_test

import (
	"os"
	"testing"

	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestWorkflowUnderKills runs conformance.WorkflowUnderKills on a database
// of its own.
func TestWorkflowUnderKills(t *testing.T) {
	if dsn := os.Getenv(conformance.WorkflowChildEnv); dsn != "" {
		conformance.RunWorkflowChild(dsn)
		return
	}
	if testing.Short() {
		t.Skip("starts worker processes for about 10 s")
	}
	name := testdb.NewMySQLDatabase(t)
	be := openBackend(t, name, nil)
	if err := be.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	conformance.WorkflowUnderKills(t, be, "TestWorkflowUnderKills", testdb.MySQLDatabaseURL(name, nil))
}
