package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// BuildProxy writes into dir a file-system module proxy (the layout
// GOPROXY=file://dir reads: <escaped path>/@v/list, .info, .mod, .zip)
// holding every module of ws at version, made from the working tree as it
// is: the files git tracks or would track (ignored ones left out), and
// go.mod with every sibling requirement set to version. It returns the
// go.sum lines of those modules.
func BuildProxy(ws *Workspace, version, dir string) ([]string, error) {
	siblings := ws.Siblings()
	var sums []string
	for _, m := range ws.Modules {
		lines, err := addToProxy(ws, m, siblings, version, dir)
		if err != nil {
			return nil, fmt.Errorf("build module proxy: %s: %w", m.Path, err)
		}
		sums = append(sums, lines...)
	}
	return sums, nil
}

func addToProxy(ws *Workspace, m Module, siblings map[string]bool, version, dir string) ([]string, error) {
	gomodPath := m.GoMod(ws.Root)
	data, err := os.ReadFile(gomodPath)
	if err != nil {
		return nil, err
	}
	gomod, _, err := SetSiblingVersions(gomodPath, data, siblings, version)
	if err != nil {
		return nil, err
	}
	files, err := moduleFiles(ws, m, gomod)
	if err != nil {
		return nil, err
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return nil, err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return nil, err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return nil, err
	}
	var zbuf bytes.Buffer
	if err := zip.Create(&zbuf, module.Version{Path: m.Path, Version: version}, files); err != nil {
		return nil, err
	}
	zipPath := filepath.Join(vdir, escVersion+".zip")
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return nil, err
	}
	list, err := os.ReadFile(filepath.Join(vdir, "list"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if !bytes.Contains(append([]byte("\n"), list...), []byte("\n"+version+"\n")) {
		list = append(list, version+"\n"...)
	}
	for name, content := range map[string][]byte{
		"list":               list,
		escVersion + ".info": info,
		escVersion + ".mod":  gomod,
		escVersion + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), content, 0o644); err != nil {
			return nil, err
		}
	}
	zipHash, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return nil, err
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("%s %s %s", m.Path, version, zipHash),
		fmt.Sprintf("%s %s/go.mod %s", m.Path, version, modHash),
	}, nil
}

// moduleFiles lists the files of module m as a release would hold them:
// what git tracks or would track under the module's directory, less other
// modules' directories and files deleted from the working tree; go.mod is
// given as gomod.
func moduleFiles(ws *Workspace, m Module, gomod []byte) ([]zip.File, error) {
	modDir := filepath.Join(ws.Root, filepath.FromSlash(m.Dir))
	out, err := git(modDir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	if err != nil {
		return nil, err
	}
	var nested []string // other modules' directories inside this one, relative to it
	for _, o := range ws.Modules {
		if o.Dir == m.Dir {
			continue
		}
		if m.Dir == "." {
			nested = append(nested, o.Dir+"/")
		} else if strings.HasPrefix(o.Dir, m.Dir+"/") {
			nested = append(nested, strings.TrimPrefix(o.Dir, m.Dir+"/")+"/")
		}
	}
	files := []zip.File{memFile{name: "go.mod", data: gomod}}
	seen := map[string]bool{}
outer:
	for _, p := range strings.Split(out, "\x00") {
		if p == "" || p == "go.mod" || seen[p] {
			continue
		}
		seen[p] = true
		for _, n := range nested {
			if strings.HasPrefix(p, n) {
				continue outer
			}
		}
		full := filepath.Join(modDir, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		files = append(files, diskFile{name: p, path: full})
	}
	return files, nil
}

// diskFile is a file of the working tree, for zip.Create.
type diskFile struct{ name, path string }

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.path) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// memFile is a file held in memory (a rewritten go.mod), for zip.Create.
type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                 { return f.name }
func (f memFile) Lstat() (os.FileInfo, error)  { return memInfo(f), nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

// memInfo is a memFile's os.FileInfo.
type memInfo memFile

func (i memInfo) Name() string       { return path.Base(i.name) }
func (i memInfo) Size() int64        { return int64(len(i.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
