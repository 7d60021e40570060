// Package sqltext loads a backend's static SQL statements from embedded
// .sql files, one statement per file, so that the SQL is read, reviewed and
// run (psql, mariadb) as SQL rather than as Go strings.
//
// A file may open with "--" comment lines that say what the statement does
// and why; they are for readers and are not sent to the server. The rest is
// the statement, a template whose placeholders ({{s}}, {{db}}, …) the
// backend's replacer fills in (a schema or database name it quoted itself).
// A statement that the code completes at run time (an id list appended)
// says so in its comment.
//
// It is public, beside the backend interface in the core module, because
// each SQL backend is a module of its own: it is what they share, versioned
// with the interface they implement, not an internal package of another
// module that promises nothing across versions.
package sqltext

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Load reads every NAME.sql file of dir in fsys into targets[NAME], through
// r. Every target must have its file and every file its target: a statement
// renamed on one side only is an error, not a silent empty query.
func Load(fsys fs.FS, dir string, r *strings.Replacer, targets map[string]*string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("load SQL: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok || e.IsDir() {
			continue
		}
		target := targets[name]
		if target == nil {
			return fmt.Errorf("load SQL: %s/%s is no statement of this backend", dir, e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("load SQL: %w", err)
		}
		*target = r.Replace(Statement(string(b)))
		seen[name] = true
	}
	var missing []string
	for name := range targets {
		if !seen[name] {
			missing = append(missing, name+".sql")
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("load SQL: %s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// Statement returns the statement of a file's text: without its opening
// "--" comment lines and without the final line break, but keeping a space
// before it, which statements that get a list appended end with.
func Statement(text string) string {
	for {
		line, rest, _ := strings.Cut(text, "\n")
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			break
		}
		text = rest
	}
	return strings.TrimSuffix(text, "\n")
}
