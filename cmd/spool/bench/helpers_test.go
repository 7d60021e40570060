package bench

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/cmd/spool/bench/benchtest"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/cli/clitest"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// asCLIEnv makes the test binary behave as "spool bench", so that scenarios
// that start child processes of themselves (contention, chaos) can run
// under go test.
const asCLIEnv = "SPOOL_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLIEnv) == "1" {
		os.Exit(runAsCLI(context.Background(), &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runAsCLI runs a "bench …" command line as the spool binary would.
func runAsCLI(ctx context.Context, env *cli.Env, args []string) int {
	if len(args) == 0 || args[0] != "bench" {
		return cli.Exit(env, cli.Usagef("", "this test binary runs only spool bench, not %q", args))
	}
	return cli.Exit(env, New(env).Run(ctx, args[1:]))
}

// runSpool runs a "bench …" command line in-process.
func runSpool(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, runAsCLI, nil, args...)
}

// mustSpool runs the command line and fails the test unless it exits 0.
func mustSpool(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.MustRun(t, runAsCLI, args...)
}

// testDB returns a pool to the test server; a missing server fails the test.
func testDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.PostgresPool(t)
}

var schemaExists = benchtest.SchemaExists // shared with the lab's tests
