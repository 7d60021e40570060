package mysql_test

import (
	"context"
	"testing"
)

// TestSQLEnqueueJSONWhitespace: spool_enqueue takes JSON with raw
// whitespace between tokens (RFC 8259 allows it there) and refuses raw
// control characters inside strings (it allows them only escaped).
func TestSQLEnqueueJSONWhitespace(t *testing.T) {
	be := newBackend(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		args string
		ok   bool
	}{
		{"{\n\t\"a\": [1,\r\n 2]\n}", true},
		{`{"a": "tab\tand newline\n escaped"}`, true},
		{"{\"a\": \"raw\ttab\"}", false},
		{"{\"raw\nkey\": 1}", false},
		{"{\"\n\": 10}", false}, // MariaDB's JSON_VALID takes this one
	} {
		_, err := be.DB().ExecContext(ctx, "CALL spool_enqueue('note', ?, 'default', 0, NULL, 25, '[]', '{}')", c.args)
		if (err == nil) != c.ok {
			t.Errorf("spool_enqueue args %q: error %v, want accepted %v", c.args, err, c.ok)
		}
	}
}
