package postgres

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the statements as built")

// goldenSchema is the quoted schema the golden statements are built for.
const goldenSchema = `"spool_golden"`

// sentStatements returns every statement of queries as sent, by a file
// name: the field's name in snake case (a nested group's prefixed with the
// group's name, flow_, wf_ …; the insert statements' modes suffixed).
func sentStatements(t *testing.T) map[string]string {
	t.Helper()
	q, err := buildQueries(goldenSchema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			name := prefix + snake(v.Type().Field(i).Name)
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				out[name] = f.String()
			case reflect.Map:
				for _, k := range f.MapKeys() {
					out[name+"_"+k.String()] = f.MapIndex(k).String()
				}
			case reflect.Struct:
				walk(name+"_", f)
			default:
				t.Fatalf("queries.%s: a %s, not a statement", name, f.Kind())
			}
		}
	}
	walk("", reflect.ValueOf(q))
	return out
}

func snake(s string) string {
	var b strings.Builder
	prevUpper := false
	for i, r := range s {
		upper := unicode.IsUpper(r)
		if upper {
			if i > 0 && !prevUpper { // an initialism (IDs) is one word
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		prevUpper = upper
		b.WriteRune(r)
	}
	return b.String()
}

// TestGolden checks every statement as sent (fragments included, the
// schema filled in) against testdata/NAME.golden, so that a change to a
// statement, a fragment or the code that loads them shows as a diff of
// the text the server receives. go test -run TestGolden -update rewrites
// the files.
func TestGolden(t *testing.T) {
	stmts := sentStatements(t)
	if *update {
		old, _ := filepath.Glob("testdata/*.golden")
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		for name, stmt := range stmts {
			if err := os.WriteFile(filepath.Join("testdata", name+".golden"), []byte(stmt), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	files, err := filepath.Glob("testdata/*.golden")
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range files {
		have = append(have, strings.TrimSuffix(filepath.Base(f), ".golden"))
	}
	var want []string
	for name := range stmts {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("golden files %v, statements %v (go test -run TestGolden -update)", have, want)
	}
	for name, stmt := range stmts {
		b, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
		if err != nil {
			continue // reported above
		}
		if string(b) != stmt {
			t.Errorf("%s drifted from testdata/%s.golden (go test -run TestGolden -update, then review the diff):\n%s", name, name, stmt)
		}
	}
}
