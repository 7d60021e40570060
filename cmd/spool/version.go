package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// Version is the release version, set at build time with
// -ldflags "-X main.Version=v1.2.3". Empty means the module version recorded
// in the binary.
var Version = ""

// VersionCommand prints the version, the Go version and the backends built in.
type VersionCommand struct{ m *Main }

// Run implements Command.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("version", "unexpected argument %q", pos[0])
	}
	fmt.Fprintf(c.m.Stdout, "spool %s (%s, backends: %s)\n", version(), runtime.Version(), backendList())
	return nil
}

// backendList names each backend built in once, by its first URL scheme,
// with its other schemes in parentheses: "postgres (or postgresql)".
func backendList() string {
	var names []string
	for _, schemes := range backend.Backends() {
		name := schemes[0]
		if len(schemes) > 1 {
			name += " (or " + strings.Join(schemes[1:], ", ") + ")"
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// version returns Version, else the main module's version from the build
// information.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Usage implements Command.
func (c *VersionCommand) Usage() string {
	return "Usage: spool version\n\nPrints the version of spool, the Go version it was built with and the\nbackends built in, each once, by the schemes of its database URLs.\n"
}
