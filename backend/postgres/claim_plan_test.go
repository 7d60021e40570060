package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spoolq/spool/backend"
)

// testURL is the PostgreSQL the tests use. internal/testdb imports this
// package, so the URL is read here.
func testURL() string {
	if url := os.Getenv("SPOOL_TEST_POSTGRES_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// scratchBackend returns a migrated backend on a fresh schema, dropped at the
// end of the test, and its pool.
func scratchBackend(t *testing.T) (*Backend, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	url := testURL()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // registered first, so it runs after the drop below
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	schema := "spool_internal_test_" + hex.EncodeToString(suffix[:])
	b, err := New(pool, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close() // ends its background work; the pool is the test's
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("migrate (is PostgreSQL running at %s?): %v", url, err)
	}
	return b, pool
}

// fillUnanalysed inserts n pending jobs into schema's spool_jobs with
// autovacuum off for the table, so its statistics are only those a test
// takes.
func fillUnanalysed(t *testing.T, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE `+schema+`.spool_jobs SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.spool_jobs (queue, kind, args)
		SELECT 'default', 'noop', '{}' FROM generate_series(1, $1::int)`, n); err != nil {
		t.Fatal(err)
	}
}

// TestClaimPlanIgnoresStaleStatistics plans the claim exactly as JobClaim
// runs it, on a table filled at once and never analysed, and requires the
// ordered walk of the pending index: no Sort, no bitmap scan. Without the
// claim's settings PostgreSQL sorts every pending row on each claim here.
func TestClaimPlanIgnoresStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	fillUnanalysed(t, pool, b.schema, 200000)
	// jit_above_cost 0 makes any plan a JIT candidate: the claim's own
	// settings must keep JIT off (see claimSettings).
	var jitRan bool
	plan := func(settings bool) string {
		var out string
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL jit_above_cost = 0`); err != nil {
				return err
			}
			if settings {
				if _, err := tx.Exec(ctx, claimSettings); err != nil {
					return err
				}
			}
			var raw []byte
			if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+b.sql.claim, "default", 1100, int64(60e6), "t#1", headKey.priority, headKey.runAt, headKey.id, true, true, nil, nil, nil).Scan(&raw); err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			out = nodeTypes(v)
			jitRan = strings.Contains(string(raw), `"JIT"`)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := plan(true)
	if jitRan {
		t.Fatalf("claim plan with the claim settings uses JIT: %s", got)
	}
	if strings.Contains(got, "Sort") || strings.Contains(got, "Bitmap") || strings.Contains(got, "Seq Scan") ||
		strings.Contains(got, "Hash") || !strings.Contains(got, "Index Scan") {
		t.Fatalf("claim plan with the claim settings: %s", got)
	}
	// JobClaim runs its statements on their generic plans: built on this
	// table, they too reach spool_jobs and spool_queues by index scans
	// only (claimPlanSettings).
	args := `'default', 1100, 60000000, 't#1', ` + strconv.Itoa(int(headKey.priority)) + `, '-infinity', 0`
	for _, st := range []struct{ name, query, args string }{
		{"claim", b.sql.claim, "(" + args + ", true, true, 0, '-infinity', 5)"},
		{"small claim", b.sql.claimSmall, "(" + args + ")"},
	} {
		tables := []string{"spool_jobs", "spool_queues"}
		if st.query == b.sql.claim {
			tables = append(tables, "spool_claim_floors")
		}
		for _, table := range tables {
			scans := preparedPlanScans(t, pool, claimSettings+claimPlanSettings, st.query, st.args, table)
			for _, scan := range strings.Split(scans, ", ") {
				// The claim deletes the rows it locked by their tuple ids.
				if !strings.HasPrefix(scan, "Index Scan") && scan != "Tid Scan on spool_jobs" {
					t.Errorf("%s: generic plan reaches %s by %s", st.name, table, scans)
					break
				}
			}
		}
	}
	// The hazard the settings guard against is real on this server: without
	// them the same statement is planned with a sort of all pending rows.
	if without := plan(false); !strings.Contains(without, "Sort") {
		t.Logf("note: without the settings the plan is %s (no sort on this server version)", without)
	}
	// And JIT would run without them, where the server has it.
	var available bool
	if err := pool.QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if available && !jitRan {
		t.Fatal("without the claim settings and with jit_above_cost 0 the claim plan shows no JIT: the JIT check proves nothing")
	}
}

// nodeTypes lists the "Node Type" values of an EXPLAIN (FORMAT JSON) plan.
func nodeTypes(v any) string {
	var names []string
	walkPlan(v, func(node map[string]any) {
		if n, ok := node["Node Type"].(string); ok {
			names = append(names, n)
		}
	})
	return strings.Join(names, ", ")
}

// walkPlan calls visit on every object of a decoded EXPLAIN (FORMAT JSON)
// plan.
func walkPlan(v any, visit func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		visit(x)
		for _, c := range x {
			walkPlan(c, visit)
		}
	case []any:
		for _, c := range x {
			walkPlan(c, visit)
		}
	}
}

// TestLeasedStatementsGenericPlan builds the generic plans of the leased
// finish, completion and heartbeat as queryBatch runs small batches, on a
// lease table never analysed, and requires them to reach spool_leases
// through its indexes only: the index of spans for the jobs' lease rows,
// the primary key for the rows they update. Without genericPlanSettings
// the generic plan scans the whole table, every dead lease row included.
// A wide batch's plan, made per call with widePlanSettings on the pool or
// without settings in a caller's transaction, must take the index of spans
// too.
func TestLeasedStatementsGenericPlan(t *testing.T) {
	t.Parallel()
	b, pool := scratchBackend(t)
	// A batch of 100 ids and fences, for the plan a wide batch gets.
	var list []string
	for id := range 100 {
		list = append(list, strconv.Itoa(id+1))
	}
	ids := "'{" + strings.Join(list, ",") + "}'::bigint[]"
	fences := `array_fill(1, ARRAY[100])::integer[]`
	statements := []struct {
		name, query, args, wideArgs string
	}{
		{"finish", b.sql.finishLeased, `('{1,2}'::bigint[], '{1,1}'::integer[], '{1,1}'::smallint[], '{0,0}'::bigint[], ARRAY[NULL, NULL]::jsonb[], false)`,
			`(` + ids + `, ` + fences + `, array_fill(1, ARRAY[100])::smallint[], array_fill(0, ARRAY[100])::bigint[], array_fill(NULL::jsonb, ARRAY[100]), false)`},
		{"heartbeat", b.sql.heartbeatLeased, `('{1,2}'::bigint[], '{1,1}'::integer[], 30000000)`, `(` + ids + `, ` + fences + `, 30000000)`},
		{"completion, kept", b.sql.completeLeasedKeep, `('{1,2}'::bigint[], '{1,1}'::integer[])`, `(` + ids + `, ` + fences + `)`},
		{"completion, deleted", b.sql.completeLeasedDelete, `('{1,2}'::bigint[], '{1,1}'::integer[])`, `(` + ids + `, ` + fences + `)`},
	}
	for _, st := range statements {
		plan := func(settings string) string {
			return preparedPlanScans(t, pool, settings, st.query, st.args, "spool_leases")
		}
		got := plan(genericPlanSettings)
		scans := strings.Split(got, ", ")
		if slices.ContainsFunc(scans, func(s string) bool { return !strings.HasPrefix(s, "Bitmap ") }) ||
			!slices.Contains(scans, "Bitmap Index Scan on spool_leases_span") {
			t.Errorf("%s: generic plan with the settings reaches spool_leases by %s", st.name, got)
		}
		if without := plan(`SET LOCAL plan_cache_mode = force_generic_plan`); !strings.Contains(without, "Seq Scan") {
			t.Logf("note: %s: without the settings the generic plan reaches spool_leases by %s (no whole-table scan on this server)", st.name, without)
		}
	}
	// Lease rows for 5,000 jobs, analysed: a wide batch is planned per call
	// with its real ids, for a table the planner knows, and must take the
	// span index, not read every lease row, on the pool (widePlanSettings).
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind) SELECT 'noop' FROM generate_series(1, 5000)`); err != nil {
		t.Fatal(err)
	}
	if rows, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 5000, Lease: time.Minute, ClaimID: "t#1"}); err != nil || len(rows) != 5000 {
		t.Fatalf("claim: %d jobs, %v", len(rows), err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+b.schema+`.spool_leases`); err != nil {
		t.Fatal(err)
	}
	// In a caller's transaction the statement is planned per call without
	// the settings (customPlan), and takes the index as well.
	for _, st := range statements {
		for _, settings := range []string{widePlanSettings, customPlanSettings} {
			if wide := preparedPlanScans(t, pool, settings, st.query, st.wideArgs, "spool_leases"); strings.Contains(wide, "Seq Scan") ||
				!strings.Contains(wide, "Index Scan on spool_leases_span") {
				t.Errorf("%s: a wide batch's plan after %.60q… reaches spool_leases by %s", st.name, settings, wide)
			}
		}
	}
}

// preparedPlanScans prepares query after settings, in a transaction of
// its own, and returns the scans of table in the plan EXECUTE with args
// (tableScans).
func preparedPlanScans(t *testing.T, pool *pgxpool.Pool, settings, query, args, table string) string {
	t.Helper()
	return tableScans(preparedPlan(t, pool, settings, query, args), table)
}

// preparedPlan prepares query after settings, in a transaction of its own,
// and returns the decoded EXPLAIN (FORMAT JSON) of EXECUTE with args.
func preparedPlan(t *testing.T, pool *pgxpool.Pool, settings, query, args string) any {
	t.Helper()
	ctx := context.Background()
	var v any
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, settings); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "PREPARE planned AS "+query); err != nil {
			return err
		}
		var raw []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE planned"+args).Scan(&raw); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE planned"); err != nil {
			return err
		}
		return json.Unmarshal(raw, &v)
	})
	if err != nil {
		t.Fatalf("plan of %.40q…: %v", query, err)
	}
	return v
}

// tableScans lists the scans of an EXPLAIN (FORMAT JSON) plan that read
// table or its indexes, as "Node Type on relation or index".
func tableScans(v any, table string) string {
	var scans []string
	walkPlan(v, func(node map[string]any) {
		n, _ := node["Node Type"].(string)
		rel, _ := node["Relation Name"].(string)
		idx, _ := node["Index Name"].(string)
		switch {
		case idx != "" && strings.HasPrefix(idx, table):
			scans = append(scans, n+" on "+idx)
		case rel == table && strings.Contains(n, "Scan"):
			scans = append(scans, n+" on "+rel)
		}
	})
	return strings.Join(scans, ", ")
}

// onPool returns a backend on a scratch schema, on a pool of its own that
// configure adjusts, and that pool.
func onPool(t *testing.T, configure func(*pgxpool.Config)) (*Backend, *pgxpool.Pool) {
	t.Helper()
	base, _ := scratchBackend(t)
	cfg, err := pgxpool.ParseConfig(testURL())
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := New(pool, &Options{Schema: base.schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, pool
}

// claimedOnPool returns a backend and its pool as onPool does, with jobs
// no-op jobs inserted and claimed in one claim (so held in lease rows),
// and the claimed rows.
func claimedOnPool(t *testing.T, jobs int, configure func(*pgxpool.Config)) (*Backend, *pgxpool.Pool, []*backend.JobRow) {
	t.Helper()
	ctx := context.Background()
	b, pool := onPool(t, configure)
	if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind) SELECT 'noop' FROM generate_series(1, $1)`, jobs); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Minute, ClaimID: "t#1"})
	if err != nil || len(rows) != jobs {
		t.Fatalf("claim: %d jobs, %v", len(rows), err)
	}
	return b, pool, rows
}

// claimedAndTraced is claimedOnPool on a pool whose statements are logged.
func claimedAndTraced(t *testing.T, jobs int) (*Backend, *pgxpool.Pool, []*backend.JobRow, *statementLog) {
	t.Helper()
	log := &statementLog{}
	b, pool, rows := claimedOnPool(t, jobs, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = log })
	return b, pool, rows, log
}

// TestSmallFinishesRunOnTheGenericPlan heartbeats and finishes leased jobs a
// few at a time through the backend on a pool of one connection, then reads
// that connection's prepared statements: the leased heartbeat, finish and
// completion ran on their generic plan every time, never planned per call.
func TestSmallFinishesRunOnTheGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const jobs, batch = 20, 2
	b, pool, rows := claimedOnPool(t, jobs, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	for i := 0; i < jobs; i += batch {
		var leases []backend.LeaseRef
		var finishes []backend.JobFinish
		for _, r := range rows[i : i+batch] {
			leases = append(leases, r.Lease())
			finishes = append(finishes, backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete})
		}
		beat, err := b.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: time.Minute})
		if err != nil || len(beat.Lost) != 0 {
			t.Fatalf("heartbeat: %+v, %v", beat, err)
		}
		if i/batch%2 == 1 {
			// Every other batch has a retry: the leased finish, not the
			// leased completion.
			finishes[0].Outcome, finishes[0].Delay = backend.OutcomeRetry, time.Hour
		}
		res, err := b.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
		if err != nil || len(res.Rejected) != 0 {
			t.Fatalf("finish: %+v, %v", res, err)
		}
	}
	const batches = jobs / batch
	var completed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+b.schema+`.spool_jobs WHERE state = 'completed'`).Scan(&completed); err != nil || completed != jobs-batches/2 {
		t.Fatalf("%d of %d jobs completed (%v), want all but the %d retried", completed, jobs, err, batches/2)
	}
	for _, st := range []struct {
		name, query string
		runs        int64
	}{{"finish", b.sql.finishLeased, batches / 2}, {"completion", b.sql.completeLeasedKeep, batches / 2}, {"heartbeat", b.sql.heartbeatLeased, batches}} {
		var generic, custom int64
		err := pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
  FROM pg_prepared_statements WHERE statement = $1`, st.query).Scan(&generic, &custom)
		if err != nil {
			t.Fatal(err)
		}
		if generic != st.runs || custom != 0 {
			t.Errorf("leased %s: %d runs on the generic plan, %d planned per call; want %d and 0", st.name, generic, custom, st.runs)
		}
	}
}

// TestClaimsRunOnTheGenericPlan claims through the backend on a pool of
// one connection, in lease rows and in place, then reads that connection's
// prepared statements: both claim statements ran on their generic plan
// every time (claimPlanSettings), never planned per call.
func TestClaimsRunOnTheGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const claims = 8
	b, pool := onPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind) SELECT 'noop' FROM generate_series(1, 2000)`); err != nil {
		t.Fatal(err)
	}
	// Claims of 100 from the backlog keep queue default's claims large; a
	// claim of queue few that finds 1 job of the 2 it asks for makes that
	// queue's next claim small (smallClaims): after its first, every claim
	// of few is small.
	for i := 0; i < claims; i++ {
		if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind, queue) VALUES ('noop', 'few')`); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			queue     string
			ask, want int
		}{{"default", 100, 100}, {"few", 2, 1}} {
			rows, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: c.queue, Max: c.ask, Lease: time.Minute, ClaimID: "t#1"})
			if err != nil || len(rows) != c.want {
				t.Fatalf("claim of %d from queue %s: %d jobs, %v; want %d", c.ask, c.queue, len(rows), err, c.want)
			}
		}
	}
	var total int64
	for _, st := range []struct{ name, query string }{{"claim", b.sql.claim}, {"small claim", b.sql.claimSmall}} {
		var generic, custom int64
		err := pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
  FROM pg_prepared_statements WHERE statement = $1`, st.query).Scan(&generic, &custom)
		if err != nil {
			t.Fatal(err)
		}
		if generic == 0 || custom != 0 {
			t.Errorf("%s: %d runs on the generic plan, %d planned per call; want some and none", st.name, generic, custom)
		}
		total += generic
	}
	if total != 2*claims {
		t.Errorf("%d claims ran on a generic plan, want all %d", total, 2*claims)
	}
}

// statementLog records the text of every statement a pool sends, alone or
// in a batch.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) add(sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, sql)
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.add(data.SQL)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	l.add(data.SQL)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns how many of the statements sent since the last take were
// each of queries, and forgets them. A query ending in "…" counts the
// statements that begin with the rest of it.
func (l *statementLog) take(queries ...string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := make([]int, len(queries))
	for _, s := range l.sql {
		for i, q := range queries {
			if s == q || strings.HasSuffix(q, "…") && strings.HasPrefix(s, strings.TrimSuffix(q, "…")) {
				n[i]++
			}
		}
	}
	l.sql = nil
	return n
}

// TestWideBatchesFindLeaseRowsBySpan heartbeats and finishes batches on both
// sides of genericPlanMax, with stale fences and a job moved back into
// spool_jobs among them, once with a retry among the outcomes (the leased
// finish) and once with completions only (the leased completion): every
// batch runs the statements that find lease rows by their span
// (sql/fragments/locate.sql), a batch of more than genericPlanMax jobs planned per call
// with sequential scans off (widePlanSettings), a smaller one on its
// generic plan, and both apply each outcome once, to the right job,
// rejecting the stale ones.
func TestWideBatchesFindLeaseRowsBySpan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const jobs = 6*genericPlanMax + 20
	b, pool, rows, log := claimedAndTraced(t, jobs)
	// One job leaves its lease row for spool_jobs, still running.
	if ok, err := b.JobRecord(ctx, &backend.JobRecordParams{Lease: rows[5].Lease(), Output: json.RawMessage(`{}`)}); err != nil || !ok {
		t.Fatalf("record: %v, %v", ok, err)
	}
	stale := func(r *backend.JobRow) bool { return r.ID%7 == 0 }
	half := jobs / 2
	retried := map[int64]bool{}
	for i, part := range [][]*backend.JobRow{rows[:genericPlanMax], rows[genericPlanMax:half], rows[half : half+genericPlanMax], rows[half+genericPlanMax:]} {
		wide, retry := len(part) > genericPlanMax, i < 2
		var leases []backend.LeaseRef
		var finishes []backend.JobFinish
		wantRejected := 0
		for _, r := range part {
			l := r.Lease()
			if stale(r) {
				l.Fence++
				wantRejected++
			}
			leases = append(leases, l)
			finishes = append(finishes, backend.JobFinish{Lease: l, Outcome: backend.OutcomeComplete})
		}
		log.take()
		beat, err := b.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: time.Hour})
		if err != nil || len(beat.Lost) != wantRejected {
			t.Fatalf("heartbeat of %d: %d lost, want %d (%v)", len(part), len(beat.Lost), wantRejected, err)
		}
		checkForm(t, fmt.Sprintf("heartbeat of %d jobs", len(part)), wide, log, b.sql.heartbeatLeased)
		narrow := b.sql.completeLeasedKeep
		if retry {
			narrow = b.sql.finishLeased
			for k, r := range part {
				if !stale(r) && r.ID != rows[5].ID {
					finishes[k].Outcome, finishes[k].Delay = backend.OutcomeRetry, time.Hour
					finishes[k].Error = &backend.AttemptError{Attempt: 1, Error: "again"}
					retried[r.ID] = true
					break
				}
			}
		}
		res, err := b.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes})
		if err != nil || len(res.Rejected) != wantRejected {
			t.Fatalf("finish of %d: %d rejected, want %d (%v)", len(part), len(res.Rejected), wantRejected, err)
		}
		for _, l := range res.Rejected {
			if l.ID%7 != 0 {
				t.Errorf("finish of %d: rejected job %d, whose fence was current", len(part), l.ID)
			}
		}
		checkForm(t, fmt.Sprintf("finish of %d jobs (a retry among them: %v)", len(part), retry), wide, log, narrow)
	}
	var completed, running, retryable int
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'running'),
  count(*) FILTER (WHERE state = 'retryable')
  FROM `+b.schema+`.spool_jobs`).Scan(&completed, &running, &retryable)
	if err != nil {
		t.Fatal(err)
	}
	var leased int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+b.schema+`.spool_leased_jobs`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	staleJobs := 0
	for _, r := range rows {
		if stale(r) {
			staleJobs++
		}
	}
	if completed != jobs-staleJobs-len(retried) || retryable != len(retried) || running+leased != staleJobs {
		t.Fatalf("%d completed, %d retryable and %d still running (%d in place, %d leased); want %d, %d and %d",
			completed, retryable, running+leased, running, leased, jobs-staleJobs-len(retried), len(retried), staleJobs)
	}
}

// completionsTraced claims jobs as claimedAndTraced does and returns the
// outcomes that complete each of them.
func completionsTraced(t *testing.T, jobs int) (*Backend, *pgxpool.Pool, []backend.JobFinish, *statementLog) {
	t.Helper()
	b, pool, rows, log := claimedAndTraced(t, jobs)
	finishes := make([]backend.JobFinish, len(rows))
	for i, r := range rows {
		finishes[i] = backend.JobFinish{Lease: r.Lease(), Outcome: backend.OutcomeComplete}
	}
	return b, pool, finishes, log
}

// checkForm checks the statements log took since its last take: one run of
// stmt, after the settings of a wide batch or of a small one, as wide says.
func checkForm(t *testing.T, what string, wide bool, log *statementLog, stmt string) {
	t.Helper()
	runs := log.take(stmt, widePlanSettings+"…", genericPlanSettings+"…")
	want := []int{1, 0, 1}
	if wide {
		want = []int{1, 1, 0}
	}
	if !slices.Equal(runs, want) {
		t.Errorf("%s: %d runs of the statement, %d after the wide batches' settings and %d after the small ones', want %v",
			what, runs[0], runs[1], runs[2], want)
	}
}

// TestWideBatchesInATransaction completes a batch of more than
// genericPlanMax leased jobs in a caller's transaction, where no setting can
// be scoped to the statement: it runs the leased completion once, with no
// settings statement, and the jobs are completed once the transaction
// commits, not before.
func TestWideBatchesInATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const jobs = 2*genericPlanMax + 5
	b, pool, finishes, log := completionsTraced(t, jobs)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	log.take()
	res, err := b.JobFinishMany(ctx, &backend.JobFinishManyParams{Tx: tx, Finishes: finishes})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("finish in a transaction: %v, %d rejected", err, len(res.Rejected))
	}
	if runs := log.take(b.sql.completeLeasedKeep, "SELECT set_config(…"); runs[0] != 1 || runs[1] != 0 {
		t.Errorf("finish of %d jobs in a transaction: %d runs of the statement, %d settings statements, want the statement once and no settings", jobs, runs[0], runs[1])
	}
	count := func() (completed int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+b.schema+`.spool_jobs WHERE state = 'completed'`).Scan(&completed); err != nil {
			t.Fatal(err)
		}
		return completed
	}
	if n := count(); n != 0 {
		t.Fatalf("%d jobs completed before the transaction committed", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != jobs {
		t.Fatalf("%d jobs completed after the commit, want %d", n, jobs)
	}
}

// TestSmallCompletionPlan plans the small completions as completeMany runs
// them, on their generic plan, with statistics taken while no job ran and
// 2,000 jobs running since: the plan must reach spool_jobs through its
// primary key only. A plan through the running rows' index would read
// every running row for each completion.
func TestSmallCompletionPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	schema := b.schema
	fillUnanalysed(t, pool, schema, 20000)
	if _, err := pool.Exec(ctx, `ANALYZE `+schema+`.spool_jobs`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.spool_jobs SET state = 'running', fence = 1,
		leased_until = now() + interval '1 hour' WHERE id <= 2000`); err != nil {
		t.Fatal(err)
	}
	for name, stmt := range map[string]string{"keep": b.sql.completeKeepSmall, "delete": b.sql.completeDeleteSmall} {
		if got := preparedPlanScans(t, pool, smallPlanSettings, stmt, `('{5,7}', '{1,1}')`, "spool_jobs"); got != "Index Scan on spool_jobs_pkey" {
			t.Errorf("small completion (%s) reaches spool_jobs by %q, want only an Index Scan of spool_jobs_pkey", name, got)
		}
	}
}

// TestLeaseJobsCompressedWithLZ4 claims jobs into lease rows on a server
// that has lz4: the jobs arrays of full rows (64 jobs; a small one is not
// compressed at all) are stored compressed with it (schema 16), and read
// back whole.
func TestLeaseJobsCompressedWithLZ4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	if _, err := pool.Exec(ctx, `CREATE TEMP TABLE spool_lz4_probe (v text COMPRESSION lz4)`); err != nil {
		t.Fatalf("this server cannot compress with lz4 (%v); the test servers of .ci/test can", err)
	}
	const jobs = 200
	if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind, args) SELECT 'noop', jsonb_build_object('n', g) FROM generate_series(1, $1) g`, jobs); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Minute, ClaimID: "t#1"})
	if err != nil || len(rows) != jobs {
		t.Fatalf("claim: %d jobs, %v", len(rows), err)
	}
	var methods []string
	var full int
	if err := pool.QueryRow(ctx, `SELECT array_agg(DISTINCT coalesce(pg_column_compression(jobs), 'none')), count(*)
		FROM `+b.schema+`.spool_leases WHERE cardinality(jobs) = 64`).Scan(&methods, &full); err != nil {
		t.Fatal(err)
	}
	if full != jobs/64 || !slices.Equal(methods, []string{"lz4"}) {
		t.Fatalf("%d full lease rows, their jobs compressed by %v; want %d, by lz4", full, methods, jobs/64)
	}
	for _, r := range rows {
		got, err := b.JobGet(ctx, r.ID)
		if err != nil || got.State != backend.StateRunning || string(got.Args) != string(r.Args) || got.Fence != r.Fence {
			t.Fatalf("job %d read back from its lease row: %+v, %v; claimed as %+v", r.ID, got, err, r)
		}
	}
}

// TestClaimTakesRowsChangedAfterItsSnapshot runs the claim statement with
// a gate that holds it, its snapshot taken, until a writer has changed a
// pending row and committed. The lock meets that row in its latest
// version, which claim.sql's delete by tuple id (moved) cannot see under
// the statement's snapshot: the job must still be claimed (by late), whole
// and in its new version, and leave spool_jobs for a lease row.
func TestClaimTakesRowsChangedAfterItsSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	var first int64
	if err := pool.QueryRow(ctx, `INSERT INTO `+b.schema+`.spool_jobs (queue, kind) SELECT 'default', 'noop'
		FROM generate_series(1, 3) RETURNING id`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	const gate = 713305
	gated := strings.Replace(b.sql.claim, "WITH ep AS MATERIALIZED (",
		"WITH gate AS MATERIALIZED (SELECT pg_advisory_xact_lock("+strconv.Itoa(gate)+")), ep AS MATERIALIZED (", 1)
	gated = strings.ReplaceAll(gated, "AND NOT EXISTS (SELECT 1 FROM", "AND EXISTS (SELECT FROM gate) AND NOT EXISTS (SELECT 1 FROM")
	if strings.Count(gated, "SELECT FROM gate") != 2 || !strings.Contains(gated, "WITH gate") {
		t.Fatal("claim.sql changed shape: the gate no longer goes in front of both locking arms")
	}
	writer, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(ctx) }()
	if _, err := writer.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, gate); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, `UPDATE `+b.schema+`.spool_jobs SET tags = '{changed}' WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	claimer, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claimer.Release()
	tags := map[int64][]string{}
	done := make(chan error, 1)
	go func() {
		done <- pgx.BeginFunc(ctx, claimer, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, claimSettings); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, gated, "default", 10, int64(60e6), "t#1", 0, "-infinity", 0, false, false, nil, nil, nil)
			if err != nil {
				return err
			}
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					return err
				}
				var ts []string
				for _, tag := range v[16].([]any) {
					ts = append(ts, tag.(string))
				}
				tags[v[0].(int64)] = ts
			}
			return rows.Err()
		})
	}()
	pid := claimer.Conn().PgConn().PID()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("the claim ended before the gate held it: %v", err)
		default:
		}
		if err := pool.QueryRow(ctx, `SELECT coalesce(wait_event = 'advisory', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(tags) != 3 || !slices.Equal(tags[first], []string{"changed"}) {
		t.Fatalf("claimed %v (id: tags); want 3 jobs, job %d with its committed tags [changed]", tags, first)
	}
	var pending, leased int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+b.schema+`.spool_jobs),
		(SELECT count(*) FROM `+b.schema+`.spool_leased_jobs WHERE $1 = ANY (tags))`, "changed").Scan(&pending, &leased); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || leased != 1 {
		t.Fatalf("after the claim: %d rows left in spool_jobs, %d leased jobs with the new tags; want 0 and 1", pending, leased)
	}
}

// TestLeaseSpansWritten checks the spans of lease rows (schema 17): the
// claim writes each row's span as spool_id_span(ids) would, and a row
// inserted without one, as a client that knows only schema 16 inserts it,
// gets it from the trigger.
func TestLeaseSpansWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	const jobs = 200
	if _, err := pool.Exec(ctx, `INSERT INTO `+b.schema+`.spool_jobs (kind, args) SELECT 'noop', '{}' FROM generate_series(1, $1)`, jobs+1); err != nil {
		t.Fatal(err)
	}
	rows, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: jobs, Lease: time.Minute, ClaimID: "t#1"})
	if err != nil || len(rows) != jobs {
		t.Fatalf("claim: %d jobs, %v", len(rows), err)
	}
	var leaseRows, right int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE span = `+b.schema+`.spool_id_span(ids))
		FROM `+b.schema+`.spool_leases`).Scan(&leaseRows, &right); err != nil {
		t.Fatal(err)
	}
	if leaseRows != (jobs+63)/64 || right != leaseRows {
		t.Fatalf("%d lease rows, %d with the span of their ids; want %d, all", leaseRows, right, (jobs+63)/64)
	}
	var id int64
	var span string
	if err := pool.QueryRow(ctx, `INSERT INTO `+b.schema+`.spool_leases (queue, leased_by, leased_until, claimed_at, epoch, ids, fences, jobs)
		SELECT 'default', 'old#1', now() + interval '1 minute', now(), 0, ARRAY[j.id], ARRAY[1], ARRAY[j]
		FROM `+b.schema+`.spool_jobs j RETURNING ids[1], span::text`).Scan(&id, &span); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("[%d,%d)", id, id+1); span != want {
		t.Fatalf("a lease row inserted without a span got %s; want %s", span, want)
	}
}

// TestWideDeletedCompletionGenericPlan completes and deletes a batch of
// more than genericPlanMax leased jobs, stale fences among them: the
// deleted completion runs on its generic plan at that size too
// (queryBatch), rejects the stale jobs and deletes the others. That plan
// must join the batch with the lease rows' jobs by hashing, whatever the
// batch's size, since a nested loop there would compare every id of the
// batch with every job of the rows it locked.
func TestWideDeletedCompletionGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const jobs = 3*genericPlanMax + 10
	b, pool, finishes, log := completionsTraced(t, jobs)
	stale := 0
	for i := range finishes {
		if i%9 == 0 {
			finishes[i].Lease.Fence++
			stale++
		}
	}
	log.take()
	res, err := b.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: finishes, DeleteCompleted: true})
	if err != nil || len(res.Rejected) != stale {
		t.Fatalf("completion of %d: %d rejected, want %d (%v)", jobs, len(res.Rejected), stale, err)
	}
	checkForm(t, fmt.Sprintf("deleted completion of %d jobs", jobs), false, log, b.sql.completeLeasedDelete)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+b.schema+`.spool_leased_jobs`).Scan(&left); err != nil || left != stale {
		t.Fatalf("%d jobs left in lease rows, want the %d stale ones (%v)", left, stale, err)
	}
	var joins []string
	walkPlan(preparedPlan(t, pool, genericPlanSettings, b.sql.completeLeasedDelete, `('{1,2}'::bigint[], '{1,1}'::integer[])`), func(node map[string]any) {
		// hits joins them (fragments/leased_hits.sql); hit keeps its rows
		// of lease rows not flagged deps.
		if node["Subplan Name"] == "CTE hits" {
			joins = append(joins, fmt.Sprint(node["Node Type"]))
		}
	})
	if !slices.Equal(joins, []string{"Hash Join"}) {
		t.Fatalf("the deleted completion's generic plan joins the batch with the lease rows' jobs by %v, want a Hash Join", joins)
	}
}

// TestSettleUpdatesDependentsInIDOrder plans the settle of a root, on its
// custom and on its generic plan, and requires the dependents' update to
// walk todo (the dependents sorted by id) in a nested loop over tuple-id
// lookups: a dependent that takes no lock before the update is locked by
// it, and only an update in id order keeps to the order of the lock pass.
func TestSettleUpdatesDependentsInIDOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	job := func() *backend.JobInsertParams {
		return &backend.JobInsertParams{Queue: "wf", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
	}
	tasks := []backend.WorkflowTaskParams{{Name: "root", Job: job()}}
	for i := range 50 {
		tasks = append(tasks, backend.WorkflowTaskParams{Name: "t" + strconv.Itoa(i), Job: job(), Deps: []backend.WorkflowDep{{Task: 0}}})
	}
	w, err := b.WorkflowInsert(ctx, &backend.WorkflowInsertParams{Name: "fan", Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	root := strconv.FormatInt(w.IDs[0], 10)
	check := func(name string, v any) {
		found := false
		walkPlan(v, func(node map[string]any) {
			if node["Node Type"] != "ModifyTable" || node["Operation"] != "Update" {
				return
			}
			kids, _ := node["Plans"].([]any)
			var outer, inner map[string]any
			if len(kids) == 1 {
				if loop, _ := kids[0].(map[string]any); loop["Node Type"] == "Nested Loop" {
					if two, _ := loop["Plans"].([]any); len(two) == 2 {
						outer, _ = two[0].(map[string]any)
						inner, _ = two[1].(map[string]any)
					}
				}
			}
			if outer["Node Type"] == "CTE Scan" && outer["CTE Name"] == "todo" && inner["Node Type"] == "Tid Scan" {
				found = true
			}
		})
		if !found {
			t.Errorf("%s plan: no update walks todo over tuple-id lookups: %s", name, nodeTypes(v))
		}
	}
	args := `('{` + root + `}'::bigint[], '{true}'::boolean[])`
	check("custom", preparedPlan(t, pool, "SET LOCAL plan_cache_mode = force_custom_plan", b.sql.wf.settleChildren, args))
	check("generic", preparedPlan(t, pool, "SET LOCAL plan_cache_mode = force_generic_plan", b.sql.wf.settleChildren, args))
}
