// Package cli is what the spool command's subcommands share: their
// streams, the Command interface, flag parsing with usage and help errors,
// the choice of database, JSON output and progress drawing.
//
// Public for the lab (the bench/lab module), which shares the spool
// command's plumbing; no compatibility promise.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// EnvDatabaseURL names the environment variable read when --database-url
// is not given.
const EnvDatabaseURL = "SPOOL_DATABASE_URL"

// Command is one spool subcommand.
type Command interface {
	// Run executes the command with the arguments that follow its name.
	Run(ctx context.Context, args []string) error
	// Usage returns the command's help text.
	Usage() string
}

// Env is where a command reads and writes. Tests give buffers in place of
// the standard streams.
type Env struct {
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
	// Program names the binary in error messages and usage hints; ""
	// means "spool". The lab binary (bench/lab) shares these commands'
	// plumbing under its own name.
	Program string
}

// program returns the binary's name for messages.
func (m *Env) program() string {
	if m.Program == "" {
		return "spool"
	}
	return m.Program
}

// UsageError is a command line that cannot be run as written. It exits 2.
type UsageError struct {
	Cmd string // the command whose usage applies, "" for the program's
	Err error
}

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError for command cmd.
func Usagef(cmd, format string, args ...any) error {
	return &UsageError{Cmd: cmd, Err: fmt.Errorf(format, args...)}
}

// HelpRequest asks Execute to print usage on stdout and exit 0 (-h).
type HelpRequest struct{ Usage string }

// Error implements error.
func (h *HelpRequest) Error() string { return "help requested" }

// ParseFlags parses args with fs and returns the positional arguments. Flags
// may follow positional arguments ("jobs show 12 --json"); "--" ends the
// flags. -h returns a HelpRequest carrying usage; a bad flag a UsageError.
func ParseFlags(fs *flag.FlagSet, args []string, usage string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		// A negative number (a job id of -5) is an argument the command
		// judges, not a flag the flag package would call undefined.
		if i := negativeNumberArg(fs, args); i >= 0 {
			head, err := ParseFlags(fs, args[:i], usage)
			if err != nil {
				return nil, err
			}
			positional = append(append(positional, head...), args[i])
			args = args[i+1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &HelpRequest{Usage: usage}
			}
			return nil, &UsageError{Cmd: fs.Name(), Err: err}
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

// DefaultDatabaseURL is the store used when neither --database-url nor
// $SPOOL_DATABASE_URL is given: an embedded SQLite file in the current
// directory, created by spool migrate.
const DefaultDatabaseURL = "sqlite://" + DefaultSQLiteFile

// DefaultSQLiteFile is the path of the default store's file.
const DefaultSQLiteFile = "spool.db"

// DatabaseURL decides which database a command uses: the --database-url flag,
// else $SPOOL_DATABASE_URL, else the embedded SQLite file spool.db in the
// current directory. It is the one place that decides the default.
func DatabaseURL(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := os.Getenv(EnvDatabaseURL); v != "" {
		return v, nil
	}
	return DefaultDatabaseURL, nil
}

// DatabaseGiven reports whether the user named a database (flag or
// environment), as opposed to falling back to the default.
func DatabaseGiven(flagValue string) bool {
	return flagValue != "" || os.Getenv(EnvDatabaseURL) != ""
}

// AddDatabaseFlag registers --database-url on fs.
func AddDatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "", "database `URL` (default $"+EnvDatabaseURL+")")
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// StringList is a repeatable string flag (--tag a --tag b).
type StringList []string

// String implements flag.Value.
func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *StringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// WriteJSON writes v as indented JSON and a newline.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// Exit reports a command's outcome on env's streams and returns the process
// exit code: 0 on success and for a help request (the usage goes to
// Stdout), 2 for a usage error, 1 for any other error.
func Exit(env *Env, err error) int {
	var (
		help  *HelpRequest
		usage *UsageError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(env.Stdout, help.Usage)
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(env.Stderr, "%s: %v\n", env.program(), usage.Err)
		if usage.Cmd != "" {
			fmt.Fprintf(env.Stderr, "Run '%s %s -h' for usage.\n", env.program(), usage.Cmd)
		} else {
			fmt.Fprintf(env.Stderr, "Run '%s help' for usage.\n", env.program())
		}
		return 2
	default:
		fmt.Fprintf(env.Stderr, "%s: %v\n", env.program(), err)
		return 1
	}
}
