package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// SharedVersion is the version every go.mod of ws requires its siblings
// at; it is an error for two requirements to differ.
func SharedVersion(ws *Workspace) (string, error) {
	siblings := ws.Siblings()
	seen := map[string][]string{} // version -> modules requiring a sibling at it
	for _, m := range ws.Modules {
		p := m.GoMod(ws.Root)
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		f, err := modfile.Parse(p, data, nil)
		if err != nil {
			return "", err
		}
		for _, r := range f.Require {
			if siblings[r.Mod.Path] {
				seen[r.Mod.Version] = append(seen[r.Mod.Version], m.Dir)
			}
		}
	}
	if len(seen) != 1 {
		var vs []string
		for v, dirs := range seen {
			vs = append(vs, fmt.Sprintf("%s (in %s)", v, strings.Join(dirs, ", ")))
		}
		sort.Strings(vs)
		return "", fmt.Errorf("the modules must require their siblings at one version; found %d: %s", len(seen), strings.Join(vs, "; "))
	}
	for v := range seen {
		return v, nil
	}
	panic("unreachable")
}

// LocalProxy is a module proxy of the working tree at a version of its
// own, so that the module cache never holds two contents for one version;
// Close removes the proxy and that version from the module cache.
type LocalProxy struct {
	Workspace *Workspace
	Version   string   // the version the modules have in the proxy
	Dir       string   // the proxy's directory
	Sums      []string // the go.sum lines of the modules in the proxy
	Env       []string // environment for go commands outside the workspace, resolving the modules from the proxy
	modCache  string
}

// NewLocalProxy builds a LocalProxy of ws under tmp, at base (the shared
// version) with a pre-release part unique to this call.
func NewLocalProxy(ws *Workspace, base, tmp string) (*LocalProxy, error) {
	version := base
	if semver.Prerelease(base) == "" {
		version += "-local." + strconv.FormatInt(time.Now().UnixNano(), 10)
	} else {
		version += ".local." + strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	dir := filepath.Join(tmp, "proxy")
	sums, err := BuildProxy(ws, version, dir)
	if err != nil {
		return nil, err
	}
	goproxy, err := goEnv("GOPROXY")
	if err != nil {
		return nil, err
	}
	nosumdb, err := goEnv("GONOSUMDB")
	if err != nil {
		return nil, err
	}
	modCache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	if nosumdb != "" {
		nosumdb += ","
	}
	p := &LocalProxy{Workspace: ws, Version: version, Dir: dir, Sums: sums, modCache: modCache}
	p.Env = append(os.Environ(),
		"GOWORK=off",
		// The third-party modules come from where they always do.
		"GOPROXY=file://"+filepath.ToSlash(dir)+","+goproxy,
		// The checksum database does not know this repository's modules
		// at a local version; every other module is still checked.
		"GONOSUMDB="+nosumdb+rootModulePath,
		"GOFLAGS=",
	)
	return p, nil
}

// Close removes the proxy's version of every module from the module cache.
func (p *LocalProxy) Close() error {
	escVersion, err := module.EscapeVersion(p.Version)
	if err != nil {
		return err
	}
	for _, m := range p.Workspace.Modules {
		escPath, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		if err := removeAll(filepath.Join(p.modCache, filepath.FromSlash(escPath)+"@"+escVersion)); err != nil {
			return fmt.Errorf("remove %s@%s from the module cache: %w", m.Path, p.Version, err)
		}
		dl, _ := filepath.Glob(filepath.Join(p.modCache, "cache", "download", filepath.FromSlash(escPath), "@v", escVersion+".*"))
		for _, f := range dl {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("remove %s@%s from the module cache: %w", m.Path, p.Version, err)
			}
		}
	}
	return nil
}

// removeAll removes a directory of the module cache, which the go command
// makes read-only.
func removeAll(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// Tidy runs go mod tidy in every module against a proxy of the working
// tree, so that each go.mod and go.sum holds what the module needs on its
// own; again, with a proxy of the tidied tree, until nothing changes (a
// module's requirements follow its siblings' go.mod files). go.sum keeps no
// line for the repository's own modules: their content at a release is
// known only once it is tagged, and a user's go.sum gets them from the
// checksum database.
func Tidy(root string, log io.Writer) error {
	ws, err := LoadWorkspace(root)
	if err != nil {
		return fmt.Errorf("tidy: %w", err)
	}
	base, err := SharedVersion(ws)
	if err != nil {
		return fmt.Errorf("tidy: %w", err)
	}
	const maxPasses = 4
	for pass := 1; pass <= maxPasses; pass++ {
		before, err := moduleFilesState(ws)
		if err != nil {
			return fmt.Errorf("tidy: %w", err)
		}
		fmt.Fprintf(log, "tidy: pass %d\n", pass)
		if err := tidyOnce(ws, base, log); err != nil {
			return fmt.Errorf("tidy: %w", err)
		}
		after, err := moduleFilesState(ws)
		if err != nil {
			return fmt.Errorf("tidy: %w", err)
		}
		if after == before {
			return nil
		}
	}
	return fmt.Errorf("tidy: go.mod files still changing after %d passes", maxPasses)
}

// moduleFilesState is the content of every go.mod and go.sum of ws.
func moduleFilesState(ws *Workspace) (string, error) {
	var b strings.Builder
	for _, m := range ws.Modules {
		for _, name := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(m.GoMod(ws.Root)), name))
			if err != nil && !os.IsNotExist(err) {
				return "", err
			}
			b.WriteString(m.Dir + "/" + name + "\n")
			b.Write(data)
		}
	}
	return b.String(), nil
}

// tidyOnce runs go mod tidy in every module of ws once.
func tidyOnce(ws *Workspace, base string, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "spool-tidy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := NewLocalProxy(ws, base, tmp)
	if err != nil {
		return err
	}
	defer p.Close()
	siblings := ws.Siblings()
	for _, m := range ws.Modules {
		fmt.Fprintf(log, "tidy %s\n", m.Dir)
		gomod := m.GoMod(ws.Root)
		if err := rewriteSiblings(gomod, siblings, p.Version); err != nil {
			return err
		}
		cmd := exec.Command("go", "mod", "tidy")
		cmd.Dir = filepath.Dir(gomod)
		cmd.Env = p.Env
		out, runErr := cmd.CombinedOutput()
		if err := rewriteSiblings(gomod, siblings, base); err != nil {
			return err
		}
		if err := dropSiblingSums(filepath.Join(filepath.Dir(gomod), "go.sum")); err != nil {
			return err
		}
		if runErr != nil {
			return fmt.Errorf("go mod tidy in %s: %w\n%s", m.Dir, runErr, out)
		}
	}
	return nil
}

// Check vets every module from its own directory with only its own go.mod
// and go.sum (-mod=readonly), its siblings coming from a proxy of the
// working tree: what a user gets who requires that one module.
func Check(root string, log io.Writer) error {
	ws, err := LoadWorkspace(root)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	base, err := SharedVersion(ws)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	tmp, err := os.MkdirTemp("", "spool-check-")
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer os.RemoveAll(tmp)
	p, err := NewLocalProxy(ws, base, tmp)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer p.Close()
	siblings := ws.Siblings()
	cmds := make([]*exec.Cmd, len(ws.Modules))
	for i, m := range ws.Modules {
		gomod := m.GoMod(ws.Root)
		data, err := os.ReadFile(gomod)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		local, _, err := SetSiblingVersions(gomod, data, siblings, p.Version)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		sum, err := os.ReadFile(filepath.Join(filepath.Dir(gomod), "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("check: %w", err)
		}
		sum = append(sum, strings.Join(p.Sums, "\n")+"\n"...)
		modfilePath := filepath.Join(tmp, fmt.Sprintf("m%d.mod", i))
		if err := os.WriteFile(modfilePath, local, 0o644); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		if err := os.WriteFile(strings.TrimSuffix(modfilePath, ".mod")+".sum", sum, 0o644); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		cmd := exec.Command("go", "vet", "./...")
		cmd.Dir = filepath.Dir(gomod)
		// A copy: appended to p.Env in place, every command's
		// environment would end with the last module's go.mod.
		cmd.Env = append(slices.Clip(p.Env), "GOFLAGS=-mod=readonly -modfile="+modfilePath)
		cmds[i] = cmd
	}
	// One go vet at a time left a core idle most of the time (a module's
	// build is a chain of packages that depend on each other), so as many
	// run at once as there are CPUs.
	var (
		mu     sync.Mutex
		failed []string
		next   = make(chan int)
		wg     sync.WaitGroup
	)
	for range max(1, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				dir := ws.Modules[i].Dir
				mu.Lock()
				fmt.Fprintf(log, "check %s\n", dir)
				mu.Unlock()
				out, err := cmds[i].CombinedOutput()
				if err == nil {
					continue
				}
				mu.Lock()
				fmt.Fprintf(log, "%s: go vet with only its own go.mod and go.sum: %v\n%s", dir, err, out)
				failed = append(failed, dir)
				mu.Unlock()
			}
		}()
	}
	for i := range cmds {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Strings(failed)
	if len(failed) > 0 {
		return fmt.Errorf("check: these modules do not build on their own: %s", strings.Join(failed, ", "))
	}
	return nil
}

// rewriteSiblings sets every sibling requirement of the go.mod at path to
// version.
func rewriteSiblings(path string, siblings map[string]bool, version string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := SetSiblingVersions(path, data, siblings, version)
	if err != nil || !changed {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// dropSiblingSums removes the lines of the repository's own modules from
// the go.sum at path, and the file if nothing is left.
func dropSiblingSums(path string) error {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		mod, _, _ := bytes.Cut(line, []byte(" "))
		if string(mod) == rootModulePath || bytes.HasPrefix(mod, []byte(rootModulePath+"/")) {
			continue
		}
		keep = append(keep, line...)
	}
	if len(bytes.TrimSpace(keep)) == 0 {
		return os.Remove(path)
	}
	return os.WriteFile(path, keep, 0o644)
}

// goEnv is the value of a go env variable.
func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
