package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// JobsListCommand lists jobs newest first (as the dashboard does), or
// oldest first, with filters and paging.
type JobsListCommand struct{ m *Main }

// Run implements Command.
func (c *JobsListCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("jobs list", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	queue := fs.String("queue", "", "only jobs of this queue")
	kind := fs.String("kind", "", "only jobs of this kind")
	var states cli.StringList
	fs.Var(&states, "state", "only jobs in this state (repeatable)")
	afterID := fs.Int64("after-id", 0, "only jobs with a greater id")
	beforeID := fs.Int64("before-id", 0, "only jobs with a smaller id")
	oldestFirst := fs.Bool("oldest-first", false, "list in ascending id order")
	limit := fs.Int("limit", 100, "at most this many jobs")
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("jobs list", "unexpected argument %q", pos[0])
	}
	params := &spool.JobListParams{Queue: *queue, Kind: *kind, AfterID: *afterID, BeforeID: *beforeID, Limit: *limit, Newest: !*oldestFirst}
	for _, s := range states {
		for _, name := range strings.Split(s, ",") {
			st := backend.State(strings.TrimSpace(name))
			if !st.Valid() {
				return cli.Usagef("jobs list", "unknown state %q (want one of %s)", name, stateNames())
			}
			params.States = append(params.States, st)
		}
	}
	if *limit < 1 {
		return cli.Usagef("jobs list", "--limit must be at least 1")
	}
	if *afterID < 0 || *beforeID < 0 {
		return cli.Usagef("jobs list", "--after-id and --before-id must not be negative")
	}

	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	jobs, err := client.JobList(ctx, params)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]jobJSON, len(jobs))
		for i, j := range jobs {
			out[i] = toJobJSON(j)
		}
		return cli.WriteJSON(c.m.Stdout, out)
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tPRIORITY\tATTEMPT\tRUN_AT\tCREATED_AT")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", j.ID, j.Queue, j.Kind, j.State, j.Priority,
			j.Attempt, j.MaxAttempts, formatTime(j.RunAt), formatTime(j.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(jobs) == *limit {
		more := fmt.Sprintf("--before-id %d", jobs[len(jobs)-1].ID)
		if *oldestFirst {
			more = fmt.Sprintf("--oldest-first --after-id %d", jobs[len(jobs)-1].ID)
		}
		fmt.Fprintf(c.m.Stderr, "(showing %d jobs; more with %s)\n", len(jobs), more)
	}
	return nil
}

// stateNames lists the job states, comma-separated, in lifecycle order.
func stateNames() string {
	names := make([]string, len(backend.AllStates))
	for i, s := range backend.AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Usage implements Command.
func (c *JobsListCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs list [flags]

Lists jobs newest first (highest id first, as the dashboard does): id,
queue, kind, state, priority, attempt/max, run_at and created_at.
--oldest-first lists them in ascending id order.

Flags:

	--queue NAME
		only jobs of this queue
	--kind KIND
		only jobs of this kind
	--state STATE
		only jobs in this state; repeat or separate with commas for several
		(available, scheduled, retryable, running, completed, discarded,
		cancelled)
	--oldest-first
		list in ascending id order, oldest first
	--before-id N
		only jobs whose id is smaller than N: the next page newest first
	--after-id N
		only jobs whose id is greater than N: the next page with
		--oldest-first
	--limit N
		at most N jobs (default 100)
	--json
		print a JSON array of jobs with all their fields
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
