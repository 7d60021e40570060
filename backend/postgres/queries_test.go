package postgres

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// TestQueriesLoad checks that every statement has its file and every file
// its statement, and that each was filled in for the schema.
func TestQueriesLoad(t *testing.T) {
	q, err := buildQueries(`"s"`)
	if err != nil {
		t.Fatal(err)
	}
	stmts := map[string]string{"claim": q.claim, "finish": q.finish, "heartbeat": q.heartbeat, "now": q.now, "optimistic_claim": q.optimisticClaim,
		// Built from the fragments leased_hits, leased_jobs, lease_done, locate.
		"finish_leased": q.finishLeased, "heartbeat_leased": q.heartbeatLeased, "complete_leased_keep": q.completeLeasedKeep,
		"complete_leased_delete": q.completeLeasedDelete, "unlease_jobs": q.unleaseJobs}
	r, err := fragments(sqlFiles, `"s"`)
	if err != nil {
		t.Fatal(err)
	}
	locate := r.Replace("{{locate}}")
	for _, leased := range []string{"finish_leased", "heartbeat_leased", "complete_leased_keep", "complete_leased_delete", "unlease_jobs"} {
		if strings.Count(stmts[leased], locate) != 1 {
			t.Errorf("%s does not find its lease rows once through the span index: %q", leased, stmts[leased])
		}
		if want := leased != "unlease_jobs"; q.leased(stmts[leased]) != want {
			t.Errorf("%s: leased %v, want %v", leased, !want, want)
		}
	}
	if q.leased(q.finish) || q.leased(q.heartbeat) {
		t.Error("the in-place finish or heartbeat counts as leased")
	}
	for name, stmt := range stmts {
		if stmt == "" || strings.Contains(stmt, "{{") || strings.HasPrefix(strings.TrimSpace(stmt), "--") {
			t.Errorf("%s: %q", name, stmt)
		}
	}
	if !strings.Contains(q.claim, `"s".spool_jobs`) {
		t.Errorf("claim not filled in for the schema: %q", q.claim)
	}
}

// TestClaimSmallArms checks that the small claim chooses its rows as the
// claim does: the two arms of claim_small.sql are those of claim.sql but
// for the columns they select, so a change to one (a new condition, an
// order) cannot miss the other.
func TestClaimSmallArms(t *testing.T) {
	q, err := buildQueries(`"s"`)
	if err != nil {
		t.Fatal(err)
	}
	arm := func(stmt, name string) string {
		t.Helper()
		start := strings.Index(stmt, name+" AS MATERIALIZED (")
		if start < 0 {
			t.Fatalf("no %s arm in %q", name, stmt)
		}
		body := stmt[start:]
		body = body[:strings.Index(body, "FOR UPDATE SKIP LOCKED")]
		// The select list is the one part that differs.
		lines := strings.Split(body, "\n")
		return strings.Join(lines[2:], "\n")
	}
	for _, name := range []string{"higher", "above"} {
		if big, small := arm(ownFloorOnly(t, q.claim), name), arm(q.claimSmall, name); big != small {
			t.Errorf("%s arm differs:\nclaim.sql:\n%s\nclaim_small.sql:\n%s", name, big, small)
		}
	}
}

// TestClaimVariants checks that the in-place claim and the quick flow
// claim are the claim but for what they must change, so that a change to
// claim.sql cannot miss them: claim_in_place.sql is claim.sql with
// leasable false; flow_quick.sql ends with claim_in_place.sql's CTEs,
// taking (SELECT n FROM allowed) jobs instead of $2. Comment lines, which
// say why each differs, are left out of the comparison.
func TestClaimVariants(t *testing.T) {
	q, err := buildQueries(`"s"`)
	if err != nil {
		t.Fatal(err)
	}
	const leasable, inPlace = "true AND unique_key IS NULL", "false AND unique_key IS NULL"
	if strings.Count(q.claim, leasable) != 2 {
		t.Fatalf("claim.sql no longer decides leasable in its two arms (%q): %s", leasable, q.claim)
	}
	if want := strings.ReplaceAll(ownFloorOnly(t, q.claim), leasable, inPlace); noComments(q.claimInPlace) != noComments(want) {
		t.Errorf("claim_in_place.sql is not claim.sql with leasable false and without the shared floor:\n%s\nwant\n%s", q.claimInPlace, want)
	}
	rest, ok := strings.CutPrefix(q.claimInPlace, "WITH ")
	if !ok || strings.Contains(rest, "$8") {
		t.Fatalf("claim_in_place.sql no longer opens with WITH, or uses $8 (flow_quick.sql's prefetch): %s", q.claimInPlace)
	}
	tail := ",\n" + strings.ReplaceAll(rest, "$2", "(SELECT n FROM allowed)")
	if !strings.HasSuffix(noComments(q.flow.quick), noComments(tail)) {
		t.Errorf("flow_quick.sql does not end with claim_in_place.sql's CTEs taking (SELECT n FROM allowed) jobs:\n%s\nwant the end\n%s", q.flow.quick, tail)
	}
}

// ownFloorOnly returns claim.sql as it would be without the shared claim
// floor (floor.go), which only it reads and writes: its CTEs fl, ends and
// frontier left out, and its arms starting at the process's own floor ($5,
// $6, $7) as the other claims' do. Comment lines are left out.
func ownFloorOnly(t *testing.T, claim string) string {
	t.Helper()
	s := noComments(claim)
	start, end := strings.Index(s, "fl AS MATERIALIZED ("), strings.Index(s, "higher AS MATERIALIZED (")
	if start < 0 || end < start {
		t.Fatalf("claim.sql no longer opens with the floor fl before its arm higher: %s", claim)
	}
	s = s[:start] + s[end:]
	start, end = strings.Index(s, "),\nends AS MATERIALIZED ("), strings.Index(s, "\nSELECT m.id, m.queue")
	if start < 0 || end < start {
		t.Fatalf("claim.sql no longer writes the shared floor (ends, frontier) after its other CTEs: %s", claim)
	}
	s = s[:start] + ")" + s[end:]
	for _, r := range [][2]string{
		{"priority < (SELECT fl.priority FROM fl)", "priority < $5::smallint"},
		{"(priority, run_at, id) > (SELECT fl.priority, fl.run_at, fl.id FROM fl)", "(priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)"},
	} {
		if strings.Count(s, r[0]) != 1 {
			t.Fatalf("claim.sql's arms no longer start at fl as %q: %s", r[0], claim)
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return s
}

// noComments returns stmt without its comment lines.
func noComments(stmt string) string {
	var kept []string
	for _, line := range strings.Split(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// TestQueriesBadFragment checks that a statement naming a fragment
// sql/fragments lacks, or fragments that include each other, fail the
// load with an error naming them instead of sending "{{name}}" to the
// server.
func TestQueriesBadFragment(t *testing.T) {
	with := func(files map[string]string) fs.FS {
		m := fstest.MapFS{}
		err := fs.WalkDir(sqlFiles, "sql", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(sqlFiles, p)
			m[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for p, text := range files {
			m[p] = &fstest.MapFile{Data: []byte(text)}
		}
		return m
	}
	if _, err := loadQueries(with(nil), `"s"`); err != nil {
		t.Fatalf("the embedded files, copied: %v", err)
	}
	_, err := loadQueries(with(map[string]string{"sql/now.sql": "SELECT {{no_such_part}}\n"}), `"s"`)
	if err == nil || !strings.Contains(err.Error(), "{{no_such_part}}") {
		t.Errorf("a statement naming a missing fragment: %v", err)
	}
	_, err = loadQueries(with(map[string]string{
		"sql/fragments/a.sql": "-- a\n{{b}}\n", "sql/fragments/b.sql": "-- b\n{{a}}\n",
	}), `"s"`)
	if err == nil || !strings.Contains(err.Error(), "includes itself") {
		t.Errorf("fragments including each other: %v", err)
	}
}

// TestInsertTasksKeyless: insert_tasks_keyless.sql is insert_tasks.sql
// without its ON CONFLICT clause (both are fragments/task_rows.sql and
// their ends), so that a change to one cannot miss the other.
func TestInsertTasksKeyless(t *testing.T) {
	q, err := buildQueries(`"s"`)
	if err != nil {
		t.Fatal(err)
	}
	const clause = "ON CONFLICT DO NOTHING\n"
	if strings.Count(q.wf.insertTasks, clause) != 1 {
		t.Fatalf("insert_tasks.sql no longer holds %q once: %s", clause, q.wf.insertTasks)
	}
	if want := strings.Replace(q.wf.insertTasks, clause, "", 1); noComments(q.wf.insertTasksKeyless) != noComments(want) {
		t.Errorf("insert_tasks_keyless.sql is not insert_tasks.sql without %q:\n%s\nwant\n%s", clause, q.wf.insertTasksKeyless, want)
	}
}
