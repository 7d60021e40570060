package scenarios

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/bench/benchtest"
	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/cli/clitest"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// asCLIEnv makes the test binary behave as the lab binary, so that
// experiments that start child processes of themselves (contention, chaos,
// hosts, failover) can run under go test.
const asCLIEnv = "SPOOL_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLIEnv) == "1" {
		os.Exit(runAsCLI(context.Background(), &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Program: "lab"}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runAsCLI runs a lab command line as the lab binary would.
func runAsCLI(ctx context.Context, env *cli.Env, args []string) int {
	env.Program = "lab"
	return cli.Exit(env, New(env).Run(ctx, args))
}

// runLab runs a lab command line in-process.
func runLab(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, runAsCLI, nil, args...)
}

// mustLab runs the command line and fails the test unless it exits 0.
func mustLab(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.MustRun(t, runAsCLI, args...)
}

// Shared with the product's bench tests (benchtest).
var (
	schemaExists       = benchtest.SchemaExists
	checkStoresDropped = benchtest.CheckStoresDropped
	checkPlot          = benchtest.CheckPlot
)

// checkOrdered fails the test unless the latency percentiles rise.
func checkOrdered(t *testing.T, what string, s bench.LatencyStats) {
	t.Helper()
	if !(s.P50 <= s.P95 && s.P95 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) || s.P50 < 0 {
		t.Errorf("%s percentiles out of order: %+v", what, s)
	}
}

// testDB returns a pool to the test server; a missing server fails the test.
func testDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.PostgresPool(t)
}

// benchJSON runs an experiment with --json (and the test server) and
// decodes its output into out.
func benchJSON(t *testing.T, out any, args ...string) clitest.Result {
	t.Helper()
	args = append(args, "--json", "--database-url", testdb.PostgresURL())
	r := mustLab(t, args...)
	if err := json.Unmarshal([]byte(r.Stdout), out); err != nil {
		t.Fatalf("lab %s --json must print only a JSON object: %v\n%s", strings.Join(args, " "), err, r.Stdout)
	}
	return r
}

// privateTempRoot points TMPDIR, for this test and the processes it starts,
// at a directory of the test's own, so that what the code under test leaves
// there is told apart from what other processes write to the shared /tmp.
// The returned function fails the test if anything was left in it.
func privateTempRoot(t *testing.T) (checkEmpty func()) {
	t.Helper()
	// Not t.TempDir: its parent is private to this user, and the database
	// clusters some benches start run as another (initdb refuses root). A
	// root of its own, open to all with the sticky bit, as /tmp is.
	root, err := os.MkdirTemp("", "spool-bench-tmp-")
	if err != nil {
		t.Fatalf("create the test's temporary root: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777|os.ModeSticky); err != nil {
		t.Fatalf("open the test's temporary root to the servers' user: %v", err)
	}
	// t.TempDir makes its parent on first use, under TMPDIR: make it now, so
	// that the test's own t.TempDir directories stay out of the root.
	_ = t.TempDir()
	t.Setenv("TMPDIR", root)
	return func() {
		t.Helper()
		left, err := os.ReadDir(root)
		if err != nil {
			t.Fatalf("read the test's temporary root: %v", err)
		}
		for _, e := range left {
			t.Errorf("temporary directory left: %s", filepath.Join(root, e.Name()))
		}
	}
}
