package sqlite

import (
	"regexp"
	"testing"
)

// TestCompleteStatementsNumberFewParameters: the plain-completion
// statements number no more than their first three parameters (?1 the time,
// ?2 the fence, ?3 the first id) and leave the other ids as plain ?s.
// SQLite keeps every numbered parameter in a list, and the pure-Go driver
// looks up each parameter's name in it as it binds it: numbered ids made
// that quadratic in a chunk's size.
func TestCompleteStatementsNumberFewParameters(t *testing.T) {
	numbered := regexp.MustCompile(`\?[0-9]+`)
	for f, forms := range completeSQLs() {
		for m, qs := range forms {
			for b, q := range qs {
				if n := len(numbered.FindAllString(q, -1)); n > 3 {
					t.Errorf("form %d, mode %d, bucket of %d ids: %d numbered parameters", f, m, completeBuckets[b], n)
				}
			}
		}
	}
}
