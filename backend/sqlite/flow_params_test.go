package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestFlowTakeNumbersFewParameters: a keys' take numbers only the
// parameters of its first part (?5, ?6) beside the four it shares, and
// leaves the others as plain ?s (the pure-Go driver looks up every
// parameter's name as it binds it, a walk of the numbered ones); each
// part still binds its own key and maximum, in order.
func TestFlowTakeNumbersFewParameters(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "spool.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Keys k0…k9, five pending jobs each; the take asks key ki for i%4+1 jobs
	// (a part of each of the three forms), keys k0…k8 only.
	var ins []*backend.JobInsertParams
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}
	for _, k := range keys {
		for range 5 {
			ins = append(ins, &backend.JobInsertParams{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 3, FlowKey: k})
		}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	var parts []string
	args := []any{nowMicros() + 1, time.Minute.Microseconds(), "c", "q"}
	want := map[string]int{}
	forms := []string{stmt.flowPartKey, stmt.flowPartStep, stmt.flowPartBlock}
	for i, k := range keys[:9] {
		form, n := forms[i%3], i%4+1
		if form != stmt.flowPartKey {
			n = 1 // ordered keys take one job at a time
		}
		parts = append(parts, flowPart(form, len(parts) == 0))
		args = append(args, k, n)
		want[k] = n
	}
	query := strings.Replace(stmt.flowTakeKeys, "{{picked}}", strings.Join(parts, "\nUNION ALL\n"), 1)
	names := map[string]bool{}
	for _, n := range regexp.MustCompile(`\?[0-9]+`).FindAllString(query, -1) {
		names[n] = true
	}
	if len(names) != 6 {
		t.Errorf("numbered parameters %v, want ?1 to ?6", names)
	}
	got := map[string]int{}
	err = be.WriteTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		raws, err := collectRawJobs(rows)
		for _, r := range raws {
			got[r.j.FlowKey]++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("took keys %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("key %s: took %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
}
