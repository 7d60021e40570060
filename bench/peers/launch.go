package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// launcher starts runners: every run is a fresh process, so no run inherits
// another's heap, goroutines or connections.
type launcher struct {
	// dir is this module's directory (go.riversqlite.mod, graphile/).
	dir string
	// tmp holds the River-SQLite runner binary.
	tmp    string
	stderr io.Writer

	riverSQLiteOnce sync.Once
	riverSQLiteBin  string
	riverSQLiteErr  error
	npmOnce         sync.Once
	npmErr          error
}

// run starts the system's runner on spec and returns its result.
func (l *launcher) run(ctx context.Context, sys *system, spec *runSpec) (*runResult, error) {
	cmd, err := l.command(ctx, sys)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode run spec: %w", err)
	}
	var out bytes.Buffer
	tail := &tailBuffer{max: 4096}
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(l.stderr, tail)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("run %s %s: %w", sys.name, spec.Scenario, context.Cause(ctx))
		}
		return nil, fmt.Errorf("run %s %s: %w: %s", sys.name, spec.Scenario, err, strings.TrimSpace(tail.String()))
	}
	return decodeResult(out.Bytes())
}

// command returns the command that runs one spec for the system.
func (l *launcher) command(ctx context.Context, sys *system) (*exec.Cmd, error) {
	switch sys.exec {
	case execSelf:
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own binary: %w", err)
		}
		return exec.CommandContext(ctx, self, "run-one"), nil
	case execRiverSQLite:
		bin, err := l.riverSQLiteBinary(ctx)
		if err != nil {
			return nil, err
		}
		return exec.CommandContext(ctx, bin, "run-one"), nil
	case execNode:
		if err := l.npmInstall(ctx); err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, "node", filepath.Join(l.dir, "graphile", "runner.mjs"))
		cmd.Dir = filepath.Join(l.dir, "graphile")
		return cmd, nil
	}
	return nil, fmt.Errorf("system %s: unknown runner kind", sys.name)
}

// riverSQLiteBinary builds this module with go.riversqlite.mod (River at
// the newest release whose SQLite driver is on the module proxy) and the
// riversqlite build tag, once per process.
func (l *launcher) riverSQLiteBinary(ctx context.Context) (string, error) {
	l.riverSQLiteOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(l.dir, "go.riversqlite.mod")); err != nil {
			l.riverSQLiteErr = fmt.Errorf("build river-sqlite runner: %w (run from bench/peers or pass --dir)", err)
			return
		}
		bin := filepath.Join(l.tmp, "peers-riversqlite")
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "riversqlite", "-modfile=go.riversqlite.mod", "-o", bin, ".")
		cmd.Dir = l.dir
		// -modfile works only outside the repository's workspace (go.work).
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			l.riverSQLiteErr = fmt.Errorf("build river-sqlite runner: %w: %s", err, strings.TrimSpace(string(out)))
			return
		}
		l.riverSQLiteBin = bin
	})
	return l.riverSQLiteBin, l.riverSQLiteErr
}

// npmInstall installs the pinned Graphile Worker (npm ci from the committed
// package-lock.json) when graphile/node_modules is missing.
func (l *launcher) npmInstall(ctx context.Context) error {
	l.npmOnce.Do(func() {
		dir := filepath.Join(l.dir, "graphile")
		if _, err := os.Stat(filepath.Join(dir, "runner.mjs")); err != nil {
			l.npmErr = fmt.Errorf("graphile runner: %w (run from bench/peers or pass --dir)", err)
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphile-worker")); err == nil {
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			l.npmErr = fmt.Errorf("graphile runner: %w", err)
			return
		}
		fmt.Fprintln(l.stderr, "peers: installing Graphile Worker (npm ci in "+dir+")")
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			l.npmErr = fmt.Errorf("npm ci: %w: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return l.npmErr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write implements io.Writer.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
