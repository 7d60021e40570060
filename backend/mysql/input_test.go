package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// userDB opens a pool on database as an application might: its own session
// settings (params are session variables, e.g. sql_mode), not Spool's.
func userDB(t testing.TB, database string, params map[string]string) *sql.DB {
	t.Helper()
	cfg, _, err := mysql.ParseURL(testdb.MySQLDatabaseURL(database, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = params
	connector, err := drv.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func countJobs(t testing.TB, be *mysql.Backend) int {
	t.Helper()
	var n int
	if err := be.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM spool_jobs").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInsertStoresExactlyOrFails: values MySQL would truncate or mangle in a
// session that is not strict are refused by the backend itself, with
// ErrInvalidValue, before anything is written, even inside a caller's
// transaction on such a session.
func TestInsertStoresExactlyOrFails(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	lax := userDB(t, be.Database(), map[string]string{"sql_mode": "''"})
	// The lax session really would truncate: the hazard being guarded.
	conn, err := lax.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE t (v VARCHAR(3))"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES ('abcdef')"); err != nil {
		t.Fatalf("lax session refused a long value (the test needs a lax one): %v", err)
	}
	good := func() *backend.JobInsertParams {
		return &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 1}
	}
	cases := map[string]func(*backend.JobInsertParams){
		"queue of 129 characters": func(j *backend.JobInsertParams) { j.Queue = strings.Repeat("q", 129) },
		"empty kind":              func(j *backend.JobInsertParams) { j.Kind = "" },
		"kind of 256 characters":  func(j *backend.JobInsertParams) { j.Kind = strings.Repeat("é", 256) },
		"kind not UTF-8":          func(j *backend.JobInsertParams) { j.Kind = "note\xff" },
		"queue not UTF-8":         func(j *backend.JobInsertParams) { j.Queue = "q\xc3" },
		"tag not UTF-8":           func(j *backend.JobInsertParams) { j.Tags = []string{"ok", "\xe2\x82"} },
		"33 tags":                 func(j *backend.JobInsertParams) { j.Tags = make([]string, 33) },
		"args not JSON":           func(j *backend.JobInsertParams) { j.Args = json.RawMessage(`{"a":`) },
		"args not UTF-8":          func(j *backend.JobInsertParams) { j.Args = json.RawMessage("{\"a\":\"\xff\"}") },
		"metadata not UTF-8":      func(j *backend.JobInsertParams) { j.Metadata = json.RawMessage("{\"a\":\"\xff\"}") },
	}
	for name, spoil := range cases {
		for _, inTx := range []bool{false, true} {
			bad := good()
			spoil(bad)
			p := &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{good(), bad}}
			var tx *sql.Tx
			if inTx {
				if tx, err = lax.BeginTx(ctx, nil); err != nil {
					t.Fatal(err)
				}
				p.Tx = tx
			}
			_, err := be.JobInsertMany(ctx, p)
			if !errors.Is(err, mysql.ErrInvalidValue) {
				t.Errorf("%s (in a lax transaction: %v): %v, want ErrInvalidValue", name, inTx, err)
			}
			if tx != nil {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n := countJobs(t, be); n != 0 {
		t.Fatalf("%d rows written by refused batches", n)
	}
	// Four-byte UTF-8 (utf8mb4) round-trips exactly.
	j := good()
	j.Kind, j.Queue, j.Tags = "note-🦀", "q-ü", []string{"t:1"}
	j.Args = json.RawMessage(`{"s":"🦀 ünïcode ✓"}`)
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{j}})
	if err != nil {
		t.Fatal(err)
	}
	row, err := be.JobGet(ctx, res.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]string
	if err := json.Unmarshal(row.Args, &args); err != nil || row.Kind != j.Kind || row.Queue != j.Queue || args["s"] != "🦀 ünïcode ✓" {
		t.Fatalf("round trip: kind %q queue %q args %s (%v)", row.Kind, row.Queue, row.Args, err)
	}
}

// TestArgsOverMaxAllowedPacket: a job too large for one statement is a
// clear error, not a lost connection, when the client allows args larger
// than the server's max_allowed_packet.
func TestArgsOverMaxAllowedPacket(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	var packet int
	if err := be.DB().QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&packet); err != nil {
		t.Fatal(err)
	}
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn), MaxArgsBytes: packet + 1024})
	if err != nil {
		t.Fatal(err)
	}
	type big struct{ S string }
	_, err = c.Insert(ctx, spool.RawArgs("note", mustJSON(t, big{S: strings.Repeat("x", packet)})), nil)
	if !errors.Is(err, mysql.ErrInvalidValue) || !strings.Contains(err.Error(), "max_allowed_packet") {
		t.Fatalf("oversized job: %v", err)
	}
	// A batch whose total is over the packet size but whose rows are not is
	// split into statements, in one transaction, ids in order.
	rows := make([]spool.InsertManyParams, 6)
	for i := range rows {
		rows[i] = spool.InsertManyParams{Args: spool.RawArgs("note", mustJSON(t, conformance.NoteArgs{N: i, Mode: strings.Repeat("m", packet/4)}))}
	}
	res, err := c.InsertMany(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		j, err := be.JobGet(ctx, r.ID)
		var a conformance.NoteArgs
		if err != nil || json.Unmarshal(j.Args, &a) != nil || a.N != i {
			t.Fatalf("row %d: %v", i, err)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTimesAreUTC: run times and leases are the database's UTC clock,
// whatever the session's time zone and whatever time zone a caller's
// time.Time carries.
func TestTimesAreUTC(t *testing.T) {
	t.Parallel()
	be := newBackend(t, nil)
	ctx := context.Background()
	c, err := spool.NewClient(be, &spool.Config{Logger: conformance.TestLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	far := time.FixedZone("UTC+5:30", 5*3600+1800)
	at := time.Now().Add(time.Hour).In(far).Truncate(time.Microsecond)
	// A caller's session in another time zone, whose driver converts times
	// to local time: neither may shift the stored run_at.
	app := userDB(t, be.Database(), map[string]string{"time_zone": "'+05:30'"})
	tx, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	scheduled, err := c.InsertTx(ctx, tx, conformance.NoteArgs{N: 1}, &spool.InsertOpts{RunAt: at})
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.InsertTx(ctx, tx, conformance.NoteArgs{N: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if j, err := be.JobGet(ctx, scheduled.ID); err != nil || !j.RunAt.Equal(at) || j.State != backend.StateScheduled {
		t.Fatalf("run_at %v (%v), want %v", j.RunAt, err, at)
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 5, Lease: time.Minute, ClaimID: "t"})
	if err != nil || len(rows) != 1 || rows[0].ID != now.ID {
		t.Fatalf("claim: %v %v (the job inserted in a +05:30 session must be due now, the other in an hour)", rowIDs(rows), err)
	}
	if d := time.Until(*rows[0].LeasedUntil); d < 50*time.Second || d > 70*time.Second {
		t.Fatalf("lease ends in %s, want about a minute", d)
	}
}

// claimKinds inserts one job of each kind into queue "q", claims them all
// in one claim and returns their ids in kind order and each one's lease.
func claimKinds(ctx context.Context, t *testing.T, be backend.Backend, kinds ...string) ([]int64, map[int64]backend.LeaseRef) {
	t.Helper()
	jobs := make([]*backend.JobInsertParams, len(kinds))
	for i, k := range kinds {
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: k, Args: []byte(`{}`), MaxAttempts: 3}
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", Max: len(kinds), Lease: time.Minute, ClaimID: "c"})
	if err != nil || len(claimed) != len(kinds) {
		t.Fatalf("claim: %v %v", rowIDs(claimed), err)
	}
	leases := map[int64]backend.LeaseRef{}
	for _, j := range claimed {
		leases[j.ID] = j.Lease()
	}
	return res.IDs, leases
}

func rowIDs(rows []*backend.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
