package main

import (
	"context"
	"strings"

	"github.com/spoolq/spool/cmd/spool/cli"
)

// HelpCommand prints the usage of the program or of a command.
type HelpCommand struct{ m *Main }

// Run implements Command: "spool help" prints the program's usage, "spool
// help jobs list" that of jobs list.
func (c *HelpCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &cli.HelpRequest{Usage: c.m.Usage()}
	}
	if args[0] == "help" {
		return &cli.HelpRequest{Usage: c.Usage()}
	}
	return c.m.Run(ctx, append(append([]string(nil), args...), "-h"))
}

// Usage implements Command.
func (c *HelpCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool help [command [subcommand]]

Prints the usage of spool, or of a command, like 'spool <command> -h'.
`, "\n")
}
