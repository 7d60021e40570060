// Command spool is the command-line tool for Spool: it migrates the schema,
// enqueues and inspects jobs, counts queues and runs benchmarks.
//
// Every command is a type with Run and Usage in its own file; main only
// dispatches. Exit codes: 0 on success (and for -h), 1 when a command fails,
// 2 for usage errors (unknown command or flag, missing or malformed argument).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling so that a second
	// one kills the process even if a cleanup hangs.
	context.AfterFunc(ctx, stop)
	m := NewMain(os.Stdout, os.Stderr)
	m.Stdin = os.Stdin
	m.StderrTerminal = cli.IsTerminal(os.Stderr)
	code := m.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Main is the program: its streams (cli.Env) and the command table.
type Main struct{ cli.Env }

// NewMain returns a Main writing to the given streams.
func NewMain(stdout, stderr io.Writer) *Main {
	return &Main{Env: cli.Env{Stdout: stdout, Stderr: stderr}}
}

// commands returns the top-level commands by name.
func (m *Main) commands() map[string]cli.Command {
	return map[string]cli.Command{
		"migrate":   &MigrateCommand{m: m},
		"enqueue":   &EnqueueCommand{m: m},
		"jobs":      &JobsCommand{m: m},
		"queues":    &QueuesCommand{m: m},
		"periodic":  &PeriodicCommand{m: m},
		"workflows": &WorkflowsCommand{m: m},
		"batches":   &BatchesCommand{m: m},
		"signal":    &SignalCommand{m: m},
		"ui":        &UICommand{m: m},
		"bench":     bench.New(&m.Env),
		"version":   &VersionCommand{m: m},
		"help":      &HelpCommand{m: m},
	}
}

// subcommander is a command with subcommands of its own (jobs list), each
// of which the program's usage lists as "command subcommand".
type subcommander interface {
	subcommandNames() []string
}

// Execute runs the command line and reports the outcome on the streams. It
// returns the process exit code.
func (m *Main) Execute(ctx context.Context, args []string) int {
	return cli.Exit(&m.Env, m.Run(ctx, args))
}

// Run dispatches args[0] to its command.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, m.Usage())
		return &cli.UsageError{Err: errors.New("no command given")}
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		return &cli.HelpRequest{Usage: m.Usage()}
	case "-v", "-version", "--version":
		name = "version"
	}
	cmd, ok := m.commands()[name]
	if !ok {
		return &cli.UsageError{Err: fmt.Errorf("unknown command %q", name)}
	}
	return cmd.Run(ctx, args[1:])
}

// Usage returns the program's help text.
func (m *Main) Usage() string {
	return strings.TrimLeft(`
Spool is a job queue that keeps jobs as rows in your database.

Usage:

	spool <command> [arguments]

Commands:

	migrate              create or upgrade Spool's schema (and the SQLite file)
	enqueue              insert one job
	jobs list            list jobs, newest first
	jobs show            show one job with its args, metadata, errors and steps
	jobs retry           make jobs available again with fresh attempts
	jobs cancel          cancel pending or running jobs
	jobs delete          delete jobs a filter selects (never running ones)
	jobs prune           delete finished jobs older than an age
	queues               count jobs by queue and state
	queues pause         stop every process from claiming a queue's jobs
	queues resume        let a paused queue's jobs be claimed again
	queues keys          show a queue's flow keys
	periodic             list the periodic jobs recorded by the leaders
	workflows list       list workflows with their tasks' counts by state
	workflows show       show a workflow's tasks and dependencies
	workflows cancel     cancel every unfinished task of a workflow
	workflows retry      rerun a finished workflow's failed tasks in order
	batches list         list batches with their progress
	batches show         show a batch's progress, callbacks and members
	batches retry        retry a batch's discarded members
	signal               send a signal to a job (AwaitSignal)
	ui                   serve the web dashboard
	bench                measure throughput on a scratch schema
	version              print the version and the backends built in
	help                 show help for a command

Database:

	Commands that use the database take --database-url URL, or read
	`+cli.EnvDatabaseURL+` when the flag is not given (the flag wins). With
	neither, they use the embedded SQLite file ./spool.db. Only migrate
	creates a SQLite file; the other commands say so when it is missing.
	URLs: sqlite://PATH, postgres://…, mysql://…
	PostgreSQL: postgres://user@host:5432/db?sslmode=disable; the
	spool_schema query parameter selects the schema (default "spool").
	Several databases as one (docs/sharding.md): shard://URL;URL;…,
	with placement=key or queue.NAME=N among the URLs.
	migrate and ui wait for a database that cannot be reached yet; the
	other commands report it at once.

Run 'spool <command> -h' for a command's usage.
`, "\n")
}
