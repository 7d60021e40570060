//go:build unix

package postgres_test

import (
	"net/url"
	"os"
	"testing"

	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestWorkflowUnderKills runs conformance.WorkflowUnderKills on a schema of
// its own.
func TestWorkflowUnderKills(t *testing.T) {
	if dsn := os.Getenv(conformance.WorkflowChildEnv); dsn != "" {
		conformance.RunWorkflowChild(dsn)
		return
	}
	if testing.Short() {
		t.Skip("starts worker processes for about 10 s")
	}
	be := newBackend(t)
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(postgres.SchemaParam, be.Schema())
	u.RawQuery = q.Encode()
	conformance.WorkflowUnderKills(t, be, "TestWorkflowUnderKills", u.String())
}
