// Command spool is the command-line tool for Spool: it migrates the schema,
// enqueues and inspects jobs, counts queues and runs benchmarks.
//
// Every command is a type with Run and Usage in its own file; main only
// dispatches. Exit codes: 0 on success (and for -h), 1 when a command fails,
// 2 for usage errors (unknown command or flag, missing or malformed argument).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// envDatabaseURL is the environment variable read when --database-url is not
// given.
const envDatabaseURL = "SPOOL_DATABASE_URL"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling so that a second
	// one kills the process even if a cleanup hangs.
	context.AfterFunc(ctx, stop)
	m := NewMain(os.Stdout, os.Stderr)
	m.Stdin = os.Stdin
	m.StderrTerminal = isTerminal(os.Stderr)
	code := m.Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Command is one spool subcommand.
type Command interface {
	// Run executes the command with the arguments that follow its name.
	Run(ctx context.Context, args []string) error
	// Usage returns the command's help text.
	Usage() string
}

// Main is the program: its output streams and the command table. Tests run
// it with buffers in place of the standard streams.
type Main struct {
	// Stdin is read by commands given "-" for an input (enqueue --args -);
	// nil reads as empty.
	Stdin io.Reader
	// Stdout receives the commands' results.
	Stdout io.Writer
	// Stderr receives errors, logs and progress.
	Stderr io.Writer
	// StderrTerminal tells whether Stderr is a terminal, which decides how
	// progress is drawn.
	StderrTerminal bool
}

// NewMain returns a Main writing to the given streams.
func NewMain(stdout, stderr io.Writer) *Main {
	return &Main{Stdout: stdout, Stderr: stderr}
}

// commands returns the top-level commands by name.
func (m *Main) commands() map[string]Command {
	return map[string]Command{
		"migrate": &MigrateCommand{m: m},
		"enqueue": &EnqueueCommand{m: m},
		"jobs":    &JobsCommand{m: m},
		"queues":  &QueuesCommand{m: m},
		"bench":   &BenchCommand{m: m},
		"version": &VersionCommand{m: m},
		"help":    &HelpCommand{m: m},
	}
}

// Execute runs the command line and reports the outcome on the streams. It
// returns the process exit code.
func (m *Main) Execute(ctx context.Context, args []string) int {
	err := m.Run(ctx, args)
	var (
		help  *helpRequest
		usage *usageError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(m.Stdout, help.usage)
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(m.Stderr, "spool: %v\n", usage.err)
		if usage.cmd != "" {
			fmt.Fprintf(m.Stderr, "Run 'spool %s -h' for usage.\n", usage.cmd)
		} else {
			fmt.Fprintln(m.Stderr, "Run 'spool help' for usage.")
		}
		return 2
	default:
		fmt.Fprintf(m.Stderr, "spool: %v\n", err)
		return 1
	}
}

// Run dispatches args[0] to its command.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, m.Usage())
		return &usageError{err: errors.New("no command given")}
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		return &helpRequest{usage: m.Usage()}
	case "-v", "-version", "--version":
		name = "version"
	}
	cmd, ok := m.commands()[name]
	if !ok {
		return &usageError{err: fmt.Errorf("unknown command %q", name)}
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

	migrate    create or upgrade Spool's schema
	enqueue    insert one job
	jobs       list, show, retry and cancel jobs
	queues     count jobs by queue and state
	bench      measure throughput on a scratch schema
	version    print the version
	help       show help for a command

Database:

	Commands that use the database take --database-url URL, or read
	`+envDatabaseURL+` when the flag is not given (the flag wins). With
	neither, they use the embedded SQLite file ./spool.db (created on first
	use). URLs: sqlite://PATH, postgres://…, mysql://…
	PostgreSQL: postgres://user@host:5432/db?sslmode=disable; the
	spool_schema query parameter selects the schema (default "spool").

Run 'spool <command> -h' for a command's usage.
`, "\n")
}

// usageError is a command line that cannot be run as written. It exits 2.
type usageError struct {
	cmd string // the command whose usage applies, "" for the program's
	err error
}

// Error implements error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usageError for command cmd.
func usageErrorf(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// helpRequest asks Execute to print usage on stdout and exit 0 (-h).
type helpRequest struct{ usage string }

// Error implements error.
func (h *helpRequest) Error() string { return "help requested" }

// parseFlags parses args with fs and returns the positional arguments. Flags
// may follow positional arguments ("jobs show 12 --json"); "--" ends the
// flags. -h returns a helpRequest carrying usage; a bad flag a usageError.
func parseFlags(fs *flag.FlagSet, args []string, usage string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		// A negative number (a job id of -5) is an argument the command
		// judges, not a flag the flag package would call undefined.
		if i := negativeNumberArg(fs, args); i >= 0 {
			head, err := parseFlags(fs, args[:i], usage)
			if err != nil {
				return nil, err
			}
			positional = append(append(positional, head...), args[i])
			args = args[i+1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{usage: usage}
			}
			return nil, &usageError{cmd: fs.Name(), err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// negativeNumberArg returns the index of the first argument that is a
// negative number and not the value of the flag before it, or -1. A "--"
// ends the search: what follows it is positional anyway.
func negativeNumberArg(fs *flag.FlagSet, args []string) int {
	for i, a := range args {
		if a == "--" {
			return -1
		}
		if len(a) < 2 || a[0] != '-' || !(a[1] >= '0' && a[1] <= '9' || a[1] == '.') {
			continue
		}
		if _, err := strconv.ParseFloat(a[1:], 64); err != nil {
			continue
		}
		if i > 0 && takesValue(fs, args[i-1]) {
			continue
		}
		return i
	}
	return -1
}

// takesValue reports whether arg is a flag of fs written without "=" that
// consumes the next argument as its value.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if len(arg)-len(name) < 1 || len(arg)-len(name) > 2 || name == "" || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// defaultDatabaseURL is the store used when neither --database-url nor
// $SPOOL_DATABASE_URL is given: an embedded SQLite file in the current
// directory, created on first use.
const defaultDatabaseURL = "sqlite://" + defaultSQLiteFile

// defaultSQLiteFile is the path of the default store's file.
const defaultSQLiteFile = "spool.db"

// databaseURL decides which database a command uses: the --database-url flag,
// else $SPOOL_DATABASE_URL, else the embedded SQLite file spool.db in the
// current directory. It is the one place that decides the default.
func databaseURL(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := os.Getenv(envDatabaseURL); v != "" {
		return v, nil
	}
	return defaultDatabaseURL, nil
}

// databaseURL is the package's databaseURL, and says on Stderr where the
// default store is when it falls back to it.
func (m *Main) databaseURL(flagValue string) (string, error) {
	dsn, err := databaseURL(flagValue)
	if err == nil && !databaseGiven(flagValue) {
		where := defaultSQLiteFile
		if abs, err := filepath.Abs(defaultSQLiteFile); err == nil {
			where = abs
		}
		fmt.Fprintf(m.Stderr, "spool: no --database-url or $%s given; using the SQLite file %s\n", envDatabaseURL, where)
	}
	return dsn, err
}

// databaseGiven reports whether the user named a database (flag or
// environment), as opposed to falling back to the default.
func databaseGiven(flagValue string) bool {
	return flagValue != "" || os.Getenv(envDatabaseURL) != ""
}

// addDatabaseFlag registers --database-url on fs.
func addDatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "", "database `URL` (default $"+envDatabaseURL+")")
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// stringList is a repeatable string flag (--tag a --tag b).
type stringList []string

// String implements flag.Value.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
