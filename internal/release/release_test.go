package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// repoRoot is the root of the repository this test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository root: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// cloneRepo clones the repository's committed HEAD into a temporary
// directory, with a committer identity of its own.
func cloneRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", repoRoot(t), dir).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	for _, kv := range [][2]string{{"user.name", "release test"}, {"user.email", "release-test@example.com"}, {"tag.gpgSign", "false"}, {"commit.gpgSign", "false"}} {
		if _, err := git(dir, "config", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// state is what a refused or dry run must leave as it was.
func state(t *testing.T, dir string) string {
	t.Helper()
	head, err := git(dir, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := git(dir, "tag", "--list")
	if err != nil {
		t.Fatal(err)
	}
	status, err := git(dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		t.Fatal(err)
	}
	return head + "\n" + tags + "\n" + status
}

// TestRelease runs the release on a clone of the repository: a dry run and
// refused inputs change nothing; the release sets every requirement on a
// sibling module and every go.work replacement to the version, in one
// commit, tags every module there, and refuses to run twice.
func TestRelease(t *testing.T) {
	dir := cloneRepo(t)
	ws, err := LoadWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Modules) < 10 {
		t.Fatalf("the clone's workspace has %d modules, want every module of the repository", len(ws.Modules))
	}
	const version = "v0.7.3"
	before := state(t, dir)

	var dry strings.Builder
	if err := Release(ReleaseOptions{Root: dir, Version: version, DryRun: true, Out: &dry}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, m := range ws.Modules {
		if !strings.Contains(dry.String(), "would tag "+m.Tag(version)+"\n") {
			t.Errorf("the dry run does not say it would tag %s:\n%s", m.Tag(version), dry.String())
		}
	}
	if after := state(t, dir); after != before {
		t.Fatalf("the dry run changed the clone:\n%s\nwas\n%s", after, before)
	}

	for _, bad := range []string{"0.7.3", "v0.7", "v0.7.3+build.1", "v2.0.0", "latest", ""} {
		err := Release(ReleaseOptions{Root: dir, Version: bad, Out: io.Discard})
		if !errors.Is(err, ErrBadVersion) {
			t.Errorf("release %q: %v, want ErrBadVersion", bad, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "backend", "stray.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Release(ReleaseOptions{Root: dir, Version: version, Out: io.Discard})
	if !errors.Is(err, ErrDirtyTree) || !strings.Contains(err.Error(), "backend/stray.txt") {
		t.Errorf("release in a dirty tree: %v, want ErrDirtyTree naming backend/stray.txt", err)
	}
	if err := os.Remove(filepath.Join(dir, "backend", "stray.txt")); err != nil {
		t.Fatal(err)
	}
	if after := state(t, dir); after != before {
		t.Fatalf("a refused release changed the clone:\n%s\nwas\n%s", after, before)
	}

	if err := Release(ReleaseOptions{Root: dir, Version: version, Out: io.Discard}); err != nil {
		t.Fatalf("release: %v", err)
	}
	head, err := git(dir, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := git(dir, "status", "--porcelain"); status != "" {
		t.Errorf("the release left changes uncommitted:\n%s", status)
	}
	siblings := ws.Siblings()
	requirements := 0
	for _, m := range ws.Modules {
		p := m.GoMod(dir)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(p, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Require {
			if siblings[r.Mod.Path] {
				requirements++
				if r.Mod.Version != version {
					t.Errorf("%s requires %s at %s, want %s", m.Dir, r.Mod.Path, r.Mod.Version, version)
				}
			}
		}
		commit, err := git(dir, "rev-parse", m.Tag(version)+"^{commit}")
		if err != nil {
			t.Errorf("tag of %s: %v", m.Path, err)
		} else if commit != head {
			t.Errorf("tag %s is at %s, want the release commit %s", m.Tag(version), commit, head)
		}
	}
	if requirements == 0 {
		t.Error("no module requires a sibling: the check above checked nothing")
	}
	work, err := os.ReadFile(filepath.Join(dir, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := modfile.ParseWork("go.work", work, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(wf.Replace) != len(ws.Modules) {
		t.Errorf("go.work has %d replacements, want one per module (%d)", len(wf.Replace), len(ws.Modules))
	}
	for _, r := range wf.Replace {
		if r.Old.Version != version {
			t.Errorf("go.work replaces %s at %s, want %s", r.Old.Path, r.Old.Version, version)
		}
	}
	if tags, _ := git(dir, "tag", "--list", "*"+version); len(strings.Fields(tags)) != len(ws.Modules) {
		t.Errorf("tags made: %q, want one per module (%d)", tags, len(ws.Modules))
	}

	err = Release(ReleaseOptions{Root: dir, Version: version, Out: io.Discard})
	if !errors.Is(err, ErrTagExists) {
		t.Errorf("releasing %s again: %v, want ErrTagExists", version, err)
	}
}

// TestLoadWorkspaceRefuses: a go.mod that go.work does not use, and a
// replace directive in a go.mod, make the workspace unreleasable.
func TestLoadWorkspaceRefuses(t *testing.T) {
	dir := cloneRepo(t)
	stray := filepath.Join(dir, "contrib", "extra")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "go.mod"), []byte("module github.com/spoolq/spool/contrib/extra\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkspace(dir); err == nil || !strings.Contains(err.Error(), "contrib/extra") {
		t.Errorf("a module missing from go.work: %v, want an error naming contrib/extra", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "contrib")); err != nil {
		t.Fatal(err)
	}
	gomod := filepath.Join(dir, "cron", "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gomod, append(data, "\nreplace github.com/spoolq/spool => ../\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkspace(dir); err == nil || !strings.Contains(err.Error(), "cron/go.mod has replace directives") {
		t.Errorf("a replace directive in cron/go.mod: %v, want an error saying so", err)
	}
}
