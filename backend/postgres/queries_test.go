package postgres

import (
	"strings"
	"testing"
)

// TestQueriesLoad checks that every statement has its file and every file
// its statement, and that each was filled in for the schema.
func TestQueriesLoad(t *testing.T) {
	q, err := buildQueries(`"s"`)
	if err != nil {
		t.Fatal(err)
	}
	for name, stmt := range map[string]string{"claim": q.claim, "finish": q.finish, "heartbeat": q.heartbeat, "now": q.now, "optimistic_claim": q.optimisticClaim} {
		if stmt == "" || strings.Contains(stmt, "{{") || strings.HasPrefix(strings.TrimSpace(stmt), "--") {
			t.Errorf("%s: %q", name, stmt)
		}
	}
	if !strings.Contains(q.claim, `"s".spool_jobs`) {
		t.Errorf("claim not filled in for the schema: %q", q.claim)
	}
}
