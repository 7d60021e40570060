package sqltext

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/claim.sql":  {Data: []byte("-- Claim: why it is written so.\n-- More.\nSELECT * FROM {{s}}.jobs\nWHERE id = $1\n")},
		"sql/finish.sql": {Data: []byte("UPDATE {{s}}.jobs SET x = 1 WHERE id IN \n")},
		"sql/README":     {Data: []byte("not a statement")},
	}
	var claim, finish string
	r := strings.NewReplacer("{{s}}", `"q"`)
	if err := Load(fsys, "sql", r, map[string]*string{"claim": &claim, "finish": &finish}); err != nil {
		t.Fatal(err)
	}
	if want := "SELECT * FROM \"q\".jobs\nWHERE id = $1"; claim != want {
		t.Errorf("claim = %q, want %q", claim, want)
	}
	if want := `UPDATE "q".jobs SET x = 1 WHERE id IN `; finish != want {
		t.Errorf("finish = %q, want %q (the trailing space kept for the appended list)", finish, want)
	}
	var other string
	if err := Load(fsys, "sql", r, map[string]*string{"claim": &claim, "finish": &finish, "other": &other}); err == nil || !strings.Contains(err.Error(), "lacks other.sql") {
		t.Errorf("a statement without its file: %v", err)
	}
	if err := Load(fsys, "sql", r, map[string]*string{"claim": &claim}); err == nil || !strings.Contains(err.Error(), "finish.sql is no statement") {
		t.Errorf("a file without its statement: %v", err)
	}
}
