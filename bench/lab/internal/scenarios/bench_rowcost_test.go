package scenarios

import (
	"encoding/json"
	"testing"
)

// TestBenchRowcost runs a small rowcost on its own mariadbd: every
// configuration asked for, both modes, with CPU counted.
func TestBenchRowcost(t *testing.T) {
	r := mustLab(t, "rowcost", "--jobs", "4000", "--batch", "1000", "--rounds", "1", "--json",
		"--configs", "spool_jobs,-flow,omit lease_list,lease guard,side table FK,side table,omit all parts,minimal table,-json checks,narrow,schema 19,schema 20,side table FK update trigger")
	var rows []rowcostRow
	if err := json.Unmarshal([]byte(r.Stdout), &rows); err != nil {
		t.Fatalf("lab rowcost --json: %v\n%s", err, r.Stdout)
	}
	if len(rows) != 26 {
		t.Fatalf("rows: %+v", rows)
	}
	var total float64
	for i, row := range rows {
		if want := map[bool]string{true: "delete", false: "keep"}[i%2 == 0]; row.Mode != want || len(row.Runs) != 1 {
			t.Errorf("row %d: %+v", i, row)
		}
		total += row.Insert + row.Claim + row.Finish
	}
	if total <= 0 {
		t.Errorf("no server CPU counted: %+v", rows)
	}
	if r := runLab(t, "rowcost", "--configs", "no such"); r.Code != 2 {
		t.Errorf("an unknown configuration: exit %d", r.Code)
	}
}
