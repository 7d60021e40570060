package mysql

import (
	"strings"
	"testing"
)

// TestQueriesLoad checks that every statement has its file and every file
// its statement, and that each was filled in for the database.
func TestQueriesLoad(t *testing.T) {
	q, err := buildQueries("`d`")
	if err != nil {
		t.Fatal(err)
	}
	for name, stmt := range map[string]string{"claim_select": q.claimSelect, "complete": q.complete, "heartbeat": q.heartbeat, "rescue_update": q.rescueUpdate} {
		if stmt == "" || strings.Contains(stmt, "{{") || strings.HasPrefix(strings.TrimSpace(stmt), "--") {
			t.Errorf("%s: %q", name, stmt)
		}
	}
	if !strings.Contains(q.claimSelect, "`d`.spool_jobs") {
		t.Errorf("claim_select not filled in for the database: %q", q.claimSelect)
	}
}
