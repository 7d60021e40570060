package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// rootModulePath is the root module's path. Every module of the repository
// is rootModulePath + "/" + its directory, which is also the prefix of its
// version tags: the layout the go command expects of a multi-module
// repository.
const rootModulePath = "github.com/spoolq/spool"

// Module is one module of the repository.
type Module struct {
	Path string // module path, e.g. github.com/spoolq/spool/backend/postgres
	Dir  string // directory from the repository root, slash-separated; "." for the root
}

// Tag is the name of the module's tag for version: the version itself for
// the root module, else the module's directory, a slash and the version.
func (m Module) Tag(version string) string {
	if m.Dir == "." {
		return version
	}
	return m.Dir + "/" + version
}

// GoMod is the path of the module's go.mod file under root.
func (m Module) GoMod(root string) string {
	return filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod")
}

// Workspace is the repository's set of modules, as go.work lists them.
type Workspace struct {
	Root    string   // repository root (where go.work is)
	Modules []Module // sorted by directory, the root first
}

// Siblings is the set of the workspace's module paths.
func (w *Workspace) Siblings() map[string]bool {
	s := make(map[string]bool, len(w.Modules))
	for _, m := range w.Modules {
		s[m.Path] = true
	}
	return s
}

// LoadWorkspace reads root/go.work and each module's go.mod. It refuses a
// workspace that cannot be released as it stands: a module whose path does
// not match its directory, a replace directive in go.work or any go.mod,
// or a go.mod in the tree that go.work does not list.
func LoadWorkspace(root string) (*Workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	workPath := filepath.Join(root, "go.work")
	data, err := os.ReadFile(workPath)
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	work, err := modfile.ParseWork(workPath, data, nil)
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	ws := &Workspace{Root: root}
	listed := map[string]bool{}
	for _, u := range work.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		listed[dir] = true
		want := rootModulePath
		if dir != "." {
			want += "/" + dir
		}
		m := Module{Path: want, Dir: dir}
		gomod := m.GoMod(root)
		data, err := os.ReadFile(gomod)
		if err != nil {
			return nil, fmt.Errorf("load workspace: go.work uses %s: %w", dir, err)
		}
		f, err := modfile.Parse(gomod, data, nil)
		if err != nil {
			return nil, fmt.Errorf("load workspace: %w", err)
		}
		if f.Module == nil || f.Module.Mod.Path != want {
			return nil, fmt.Errorf("load workspace: %s/go.mod: module path must be %s, the path of its directory", dir, want)
		}
		if len(f.Replace) > 0 {
			return nil, fmt.Errorf("load workspace: %s/go.mod has replace directives, which users of the module ignore; go.work alone joins the tree", dir)
		}
		ws.Modules = append(ws.Modules, m)
	}
	var unlisted []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if !listed[filepath.ToSlash(rel)] {
			unlisted = append(unlisted, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	if len(unlisted) > 0 {
		return nil, fmt.Errorf("load workspace: go.work does not use the modules in %s", strings.Join(unlisted, ", "))
	}
	if len(ws.Modules) == 0 {
		return nil, errors.New("load workspace: go.work uses no module")
	}
	dirs := map[string]string{}
	for _, m := range ws.Modules {
		dirs[m.Path] = m.Dir
	}
	for _, r := range work.Replace {
		dir, ok := dirs[r.Old.Path]
		if !ok || r.Old.Version == "" || r.New.Version != "" || filepath.ToSlash(filepath.Clean(r.New.Path)) != dir {
			return nil, fmt.Errorf("load workspace: go.work: replace %s %s => %s: go.work may only replace a version of one of its modules by that module's directory", r.Old.Path, r.Old.Version, r.New.Path)
		}
	}
	sort.Slice(ws.Modules, func(i, j int) bool {
		a, b := ws.Modules[i].Dir, ws.Modules[j].Dir
		if (a == ".") != (b == ".") {
			return a == "."
		}
		return a < b
	})
	return ws, nil
}

// SetWorkReplaces returns the text of go.work (data, of file name) with
// one replace directive per module of ws: the module at version replaced
// by its directory. The go command reads the go.mod of every version a
// workspace module requires of a sibling, and a version being released is
// on no proxy yet: these keep the workspace building from the tree alone.
func SetWorkReplaces(ws *Workspace, name string, data []byte, version string) ([]byte, bool, error) {
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, false, fmt.Errorf("set go.work replacements: %w", err)
	}
	for _, r := range work.Replace {
		if err := work.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return nil, false, fmt.Errorf("set go.work replacements: %w", err)
		}
	}
	for _, m := range ws.Modules {
		dir := "./" + m.Dir
		if m.Dir == "." {
			dir = "./"
		}
		if err := work.AddReplace(m.Path, version, dir, ""); err != nil {
			return nil, false, fmt.Errorf("set go.work replacements: %w", err)
		}
	}
	work.Cleanup()
	out := modfile.Format(work.Syntax)
	return out, !bytes.Equal(out, data), nil
}
