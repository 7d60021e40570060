package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
)

// runFunc runs one scenario on a fresh store and reports the result.
type runFunc func(ctx context.Context, spec *runSpec) (*runResult, error)

// runners holds the systems this binary can run in process, by name.
var runners = map[string]runFunc{}

// registerRunner adds a runner; a duplicate name is a programming error.
func registerRunner(name string, f runFunc) {
	if _, dup := runners[name]; dup {
		panic("peers: runner registered twice: " + name)
	}
	runners[name] = f
}

// runnerNames lists the systems this binary runs, sorted.
func runnerNames() []string {
	names := make([]string, 0, len(runners))
	for n := range runners {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runOne is the child side of the protocol: it reads a runSpec as JSON on
// stdin, runs it, and writes the runResult as JSON on stdout. Logs and
// errors go to stderr.
func runOne(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var spec runSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		return fmt.Errorf("read run spec: %w", err)
	}
	if err := spec.validate(); err != nil {
		return err
	}
	run, ok := runners[spec.System]
	if !ok {
		return fmt.Errorf("run %s: this binary runs %v", spec.System, runnerNames())
	}
	res, err := run(ctx, &spec)
	if err != nil {
		return fmt.Errorf("%s %s: %w", spec.System, spec.Scenario, err)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// warnLogger logs warnings and errors to stderr, for the systems' clients.
func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// moduleVersion returns the version of a module built into this binary.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, m := range info.Deps {
		if m.Path == path {
			if m.Replace != nil && m.Replace.Version != "" {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "(not built in)"
}
