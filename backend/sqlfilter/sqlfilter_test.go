package sqlfilter

import (
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestList: the states are written as literals (one as an equality), a
// list of running jobs says they hold a lease, values are bound, an unknown
// state is refused, and Numbered numbers the placeholders from the one
// given.
func TestList(t *testing.T) {
	at := time.Unix(100, 0)
	p := &backend.JobListParams{Queue: "q", Kind: "k", States: []backend.State{backend.StateRunning, backend.StateDiscarded},
		BeforeID: 9, CreatedAfter: at, Newest: true, Limit: 7}
	c, tail, err := List(p, func(t time.Time) any { return t.Unix() })
	if err != nil {
		t.Fatal(err)
	}
	want := " AND queue = ? AND kind = ? AND state IN ('running', 'discarded') AND id < ? AND created_at > ?"
	if c.SQL() != want || tail != " ORDER BY id DESC LIMIT 7" {
		t.Errorf("list: %q %q", c.SQL(), tail)
	}
	if len(c.Args) != 4 || c.Args[0] != "q" || c.Args[1] != "k" || c.Args[2] != int64(9) || c.Args[3] != int64(100) {
		t.Errorf("args %v", c.Args)
	}
	if got := c.Numbered(2); got != " AND queue = $2 AND kind = $3 AND state IN ('running', 'discarded') AND id < $4 AND created_at > $5" {
		t.Errorf("numbered: %q", got)
	}
	c, _, err = List(&backend.JobListParams{States: []backend.State{backend.StateRunning}}, nil)
	if err != nil || c.SQL() != " AND state = 'running' AND leased_until IS NOT NULL" {
		t.Errorf("running: %q %v", c.SQL(), err)
	}
	if _, _, err := List(&backend.JobListParams{States: []backend.State{"x' OR 1=1 --"}}, nil); err == nil {
		t.Error("an unknown state was written into the statement")
	}
}
