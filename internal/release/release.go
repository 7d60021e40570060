package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

// ErrBadVersion is returned (wrapped) for a version the repository cannot
// be released at.
var ErrBadVersion = errors.New("bad release version")

// ErrDirtyTree is returned (wrapped) when the working tree has changes a
// release commit would mix in or leave out.
var ErrDirtyTree = errors.New("working tree not clean")

// ErrTagExists is returned (wrapped) when a tag the release would create
// exists already.
var ErrTagExists = errors.New("release tag exists")

// CheckVersion reports whether v can be a release of every module: a
// canonical semantic version (vMAJOR.MINOR.PATCH, an optional pre-release,
// no build metadata) of major version 0 or 1, since the module paths carry
// no /vN suffix.
func CheckVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v {
		return fmt.Errorf("%w %q: want a semantic version vMAJOR.MINOR.PATCH such as v0.1.0 (a pre-release such as v0.2.0-rc.1 is allowed, build metadata is not)", ErrBadVersion, v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return fmt.Errorf("%w %q: major version %s needs module paths ending in /%s; only v0 and v1 can be released as the modules are named", ErrBadVersion, v, m, m)
	}
	return nil
}

// ReleaseOptions says what Release does.
type ReleaseOptions struct {
	Root    string    // repository root
	Version string    // the version every module is released at
	DryRun  bool      // say what would be done, change nothing
	Out     io.Writer // where the steps are reported
}

// Release sets every requirement on a sibling module to o.Version in every
// go.mod, commits that (if anything changed), and creates each module's
// tag at that commit. It refuses a bad version, a dirty working tree and
// a tag that exists, before changing anything.
func Release(o ReleaseOptions) error {
	if err := CheckVersion(o.Version); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	ws, err := LoadWorkspace(o.Root)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	status, err := git(ws.Root, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if status != "" {
		return fmt.Errorf("release: %w: commit or remove these first:\n%s", ErrDirtyTree, status)
	}
	for _, m := range ws.Modules {
		tag := m.Tag(o.Version)
		if _, err := git(ws.Root, "rev-parse", "-q", "--verify", "refs/tags/"+tag); err == nil {
			return fmt.Errorf("release: %w: %s", ErrTagExists, tag)
		}
	}
	siblings := ws.Siblings()
	type edit struct {
		path string
		data []byte
	}
	var edits []edit
	for _, m := range ws.Modules {
		p := m.GoMod(ws.Root)
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		out, changed, err := SetSiblingVersions(p, data, siblings, o.Version)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if changed {
			edits = append(edits, edit{p, out})
		}
	}
	workPath := filepath.Join(ws.Root, "go.work")
	work, err := os.ReadFile(workPath)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	workOut, changed, err := SetWorkReplaces(ws, workPath, work, o.Version)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if changed {
		edits = append(edits, edit{workPath, workOut})
	}
	verb := ""
	if o.DryRun {
		verb = "would "
	}
	for _, e := range edits {
		fmt.Fprintf(o.Out, "%sset the sibling versions in %s to %s\n", verb, rel(ws.Root, e.path), o.Version)
	}
	if len(edits) > 0 {
		fmt.Fprintf(o.Out, "%scommit: release %s\n", verb, o.Version)
	}
	for _, m := range ws.Modules {
		fmt.Fprintf(o.Out, "%stag %s\n", verb, m.Tag(o.Version))
	}
	if o.DryRun {
		return nil
	}
	if len(edits) > 0 {
		args := []string{"add", "--"}
		for _, e := range edits {
			if err := os.WriteFile(e.path, e.data, 0o644); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			args = append(args, e.path)
		}
		if _, err := git(ws.Root, args...); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		msg := fmt.Sprintf("release %s: every module requires its siblings at %s", o.Version, o.Version)
		if _, err := git(ws.Root, "commit", "-q", "-m", msg); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	var tags []string
	for _, m := range ws.Modules {
		tag := m.Tag(o.Version)
		if _, err := git(ws.Root, "tag", "-a", "-m", m.Path+" "+o.Version, tag); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		tags = append(tags, tag)
	}
	fmt.Fprintf(o.Out, "publish with: git push origin HEAD %s\n", strings.Join(tags, " "))
	return nil
}

// git runs git in dir and returns its output, trimmed; a failure's error
// carries git's own message.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}

// rel is path relative to root, for messages.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}
