package dashtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/backend/shard"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/internal/testkit/testdb"
	"github.com/spoolq/spool/ui"
)

// testBackends are the stores the tests of bad input run on, each: the
// review that found them saw PostgreSQL answer a kind of invalid UTF-8
// with a 500, where SQLite took it.
var testBackends = []string{"sqlite", "postgres", "mysql"}

// everyStore is every kind of store: the SQL ones, memory, and a sharded
// store of two SQLite shards.
var everyStore = append(append([]string(nil), testBackends...), "memory", "shard")

// fixtureBackend is the store newFixture uses: $SPOOL_TEST_UI_BACKEND
// (sqlite, postgres or mysql), else SQLite.
func fixtureBackend() string {
	if b := os.Getenv("SPOOL_TEST_UI_BACKEND"); b != "" {
		return b
	}
	return "sqlite"
}

// openBackend returns a fresh, migrated store of the kind named, dropped
// when the test ends; a missing server fails the test.
func openBackend(t testing.TB, name string) backend.Backend {
	t.Helper()
	switch name {
	case "sqlite":
		ctx := context.Background()
		be, err := sqlite.OpenPath(ctx, filepath.Join(t.TempDir(), "ui.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		if err := be.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return be
	case "postgres":
		pool := testdb.PostgresPool(t)
		schema := testdb.NewSchemaName()
		be, err := postgres.New(pool, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		migrate(t, be)
		testdb.DropSchemaAtEnd(t, pool, schema)
		return be
	case "mysql":
		name := testdb.NewMySQLDatabase(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		be, err := mysql.Open(ctx, testdb.MySQLDatabaseURL(name, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		migrate(t, be)
		return be
	case "memory":
		return memory.New()
	case "shard":
		shards := []backend.Backend{openBackend(t, "sqlite"), openBackend(t, "sqlite")}
		be, err := shard.New(shards, nil)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	t.Fatalf("no test backend %q (sqlite, postgres, mysql, memory, shard)", name)
	return nil
}

// migrate brings a fresh store's schema up to date.
func migrate(t testing.TB, be interface{ Migrate(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := be.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// fixture is a dashboard over a fresh store (see fixtureBackend), served
// by a client that defines a flow-limited queue and a periodic job.
type fixture struct {
	be      backend.Backend
	client  *spool.Client
	handler *ui.Handler
}

// rawArgs are args of any kind, for jobs inserted by kind name.
type rawArgs struct {
	kind string
	Data string `json:"data"`
}

func (a rawArgs) Kind() string { return a.kind }

// reportArgs are the periodic job's args.
type reportArgs struct{}

func (reportArgs) Kind() string { return "report" }

func newFixture(t testing.TB, opts *ui.Options) *fixture {
	t.Helper()
	return newFixtureOn(t, fixtureBackend(), opts)
}

// newFixtureOn is newFixture on the backend named.
func newFixtureOn(t testing.TB, backendName string, opts *ui.Options) *fixture {
	t.Helper()
	be := openBackend(t, backendName)
	client, err := spool.NewClient(be, &spool.Config{
		AllowUnknownKinds: true,
		Queues: map[string]spool.QueueConfig{
			spool.DefaultQueue: {MaxWorkers: 1},
			"flowq":            {MaxWorkers: 1, Flow: &spool.Flow{GlobalLimit: 5, KeyLimit: 2}},
		},
		PeriodicJobs: []spool.PeriodicJob{{
			Name: "nightly-report", Schedule: spool.Every(time.Hour),
			Args: func(time.Time) spool.JobArgs { return reportArgs{} },
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{be: be, client: client, handler: h}
	f.insert(t, "note", "flowq", &spool.InsertOpts{FlowKey: "tenant-a"})
	return f
}

// insert adds a job of kind to queue ("" for the default queue).
func (f *fixture) insert(t testing.TB, kind, queue string, opts *spool.InsertOpts) int64 {
	t.Helper()
	if opts == nil {
		opts = &spool.InsertOpts{}
	}
	if queue != "" {
		opts.Queue = queue
	}
	res, err := f.client.Insert(context.Background(), rawArgs{kind: kind, Data: "secret-" + kind}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// claim takes the next job of queue "claims", as a worker would.
func (f *fixture) claim(t *testing.T, id int64) *backend.JobRow {
	t.Helper()
	rows, err := f.be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "claims", Max: 1, Lease: time.Hour, ClaimID: "ui-test"})
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("claim job %d: %v %v", id, rows, err)
	}
	return rows[0]
}

// runningJob makes a job and claims it.
func (f *fixture) runningJob(t *testing.T) int64 {
	id := f.insert(t, "note", "claims", nil)
	f.claim(t, id)
	return id
}

// discardedJob makes a job whose only attempt failed with a stack trace.
func (f *fixture) discardedJob(t *testing.T) int64 {
	return f.failedJob(t, "smtp: 550 <no such user>")
}

// failedJob makes a job whose only attempt failed with msg and a stack
// trace.
func (f *fixture) failedJob(t *testing.T, msg string) int64 {
	id := f.insert(t, "note", "claims", &spool.InsertOpts{MaxAttempts: 1})
	row := f.claim(t, id)
	res, err := f.be.JobFinishMany(context.Background(), &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{
		Lease: row.Lease(), Outcome: backend.OutcomeDiscard,
		Error: &backend.AttemptError{Attempt: 1, At: time.Now(), Error: msg, Trace: "goroutine 1 [running]:\nmain.send()"},
	}}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("discard job %d: %v %v", id, res, err)
	}
	return id
}
