package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// JobsCommand dispatches the jobs subcommands: list, show, retry, cancel,
// delete, prune.
type JobsCommand struct{ m *Main }

// subcommands returns the jobs subcommands by name.
func (c *JobsCommand) subcommands() map[string]cli.Command {
	return map[string]cli.Command{
		"list":   &JobsListCommand{m: c.m},
		"show":   &JobsShowCommand{m: c.m},
		"retry":  &JobsRetryCommand{m: c.m},
		"cancel": &JobsCancelCommand{m: c.m},
		"prune":  &JobsPruneCommand{m: c.m},
		"delete": &JobsDeleteCommand{m: c.m},
	}
}

// subcommandNames implements subcommander.
func (c *JobsCommand) subcommandNames() []string {
	return slices.Sorted(maps.Keys(c.subcommands()))
}

// Run implements cli.Command.
func (c *JobsCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("jobs", "missing subcommand (list, show, retry, cancel, delete or prune)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return &cli.HelpRequest{Usage: c.Usage()}
	}
	sub, ok := c.subcommands()[args[0]]
	if !ok {
		return cli.Usagef("jobs", "unknown subcommand %q (want list, show, retry, cancel, delete or prune)", args[0])
	}
	return sub.Run(ctx, args[1:])
}

// Usage implements cli.Command.
func (c *JobsCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs <subcommand> [arguments]

Subcommands:

	list      list jobs, filtered by queue, kind and state
	show      show one job with its args, metadata and error history
	retry     make a job, or every job a filter selects, available again with fresh attempts
	cancel    cancel a pending or running job, or every one a filter selects
	delete    delete every job a filter selects (never running ones)
	prune     delete finished jobs older than an age

Run 'spool jobs <subcommand> -h' for a subcommand's usage.
`, "\n")
}

// parseJobID reads the single positional job id of a jobs subcommand.
func parseJobID(cmd string, pos []string) (int64, error) {
	if len(pos) == 0 {
		return 0, cli.Usagef(cmd, "missing job id")
	}
	if len(pos) > 1 {
		return 0, cli.Usagef(cmd, "one job id expected, got %d arguments", len(pos))
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return 0, cli.Usagef(cmd, "job id %q is not a positive integer", pos[0])
	}
	return id, nil
}

// jobJSON is the JSON form of a job printed by the jobs commands.
type jobJSON struct {
	ID          int64                  `json:"id"`
	Queue       string                 `json:"queue"`
	Kind        string                 `json:"kind"`
	State       backend.State          `json:"state"`
	Priority    int16                  `json:"priority"`
	Attempt     int16                  `json:"attempt"`
	MaxAttempts int16                  `json:"max_attempts"`
	Fence       int32                  `json:"fence"`
	RunAt       time.Time              `json:"run_at"`
	CreatedAt   time.Time              `json:"created_at"`
	AttemptedAt *time.Time             `json:"attempted_at"`
	FinalizedAt *time.Time             `json:"finalized_at"`
	LeasedUntil *time.Time             `json:"leased_until"`
	LeasedBy    string                 `json:"leased_by"`
	Tags        []string               `json:"tags"`
	Args        json.RawMessage        `json:"args"`
	Metadata    json.RawMessage        `json:"metadata"`
	Errors      []backend.AttemptError `json:"errors"`
	Output      json.RawMessage        `json:"output"`
	UniqueKey   string                 `json:"unique_key,omitempty"`
}

// toJobJSON converts a job row, with empty lists and objects rather than
// nulls.
func toJobJSON(j *spool.JobRow) jobJSON {
	out := jobJSON{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Fence: j.Fence,
		RunAt: j.RunAt, CreatedAt: j.CreatedAt, AttemptedAt: j.AttemptedAt,
		FinalizedAt: j.FinalizedAt, LeasedUntil: j.LeasedUntil, LeasedBy: j.LeasedBy,
		Tags: j.Tags, Args: j.Args, Metadata: j.Metadata, Errors: j.Errors,
		Output: j.Output, UniqueKey: j.UniqueKey,
	}
	if len(out.Output) == 0 {
		out.Output = json.RawMessage("null")
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if len(out.Args) == 0 {
		out.Args = json.RawMessage("null")
	}
	if len(out.Metadata) == 0 {
		out.Metadata = json.RawMessage("{}")
	}
	if out.Errors == nil {
		out.Errors = []backend.AttemptError{}
	}
	return out
}

// formatTime formats a time for tables, in local time to the second.
func formatTime(t time.Time) string {
	return t.Local().Format(time.RFC3339)
}

// formatTimePtr formats an optional time, "-" when unset.
func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// explainJobChangeError turns the errors of JobRetry and JobCancel into
// messages that say what happened and what is allowed, or, after a
// connection fault, whether the change happened (explainWriteFault). op is
// "retry" or "cancel". The sentinels stay matchable with errors.Is.
func explainJobChangeError(ctx context.Context, client *spool.Client, op string, id int64, err error) error {
	switch {
	case errors.Is(err, spool.ErrNotFound):
		return fmt.Errorf("%s job %d: %w", op, id, spool.ErrNotFound)
	case errors.Is(err, spool.ErrInvalidState):
		state := "in a state that does not allow it"
		if j, gerr := client.JobGet(ctx, id); gerr == nil {
			state = string(j.State)
		}
		switch op {
		case "retry":
			return fmt.Errorf("retry job %d: job is %s; a running job cannot be retried (cancel it, or wait until it finishes): %w",
				id, state, spool.ErrInvalidState)
		default:
			return fmt.Errorf("cancel job %d: job is already %s; only pending or running jobs can be cancelled: %w",
				id, state, spool.ErrInvalidState)
		}
	}
	return explainWriteFault(err, fmt.Sprintf("'spool jobs show %d'", id), false)
}

// runJobAction is the body shared by the commands that act on one job by id
// (show, retry, cancel): it parses --database-url, --json and the id, opens a
// client, calls act, and prints the job it returns as JSON or with text.
func runJobAction(ctx context.Context, m *Main, name, usage string, args []string,
	act func(ctx context.Context, client *spool.Client, id int64) (*spool.JobRow, error),
	text func(w io.Writer, job *spool.JobRow) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := cli.ParseFlags(fs, args, usage)
	if err != nil {
		return err
	}
	id, err := parseJobID(name, pos)
	if err != nil {
		return err
	}
	client, closeClient, err := openClient(ctx, m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	job, err := act(ctx, client, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(m.Stdout, toJobJSON(job))
	}
	return text(m.Stdout, job)
}
