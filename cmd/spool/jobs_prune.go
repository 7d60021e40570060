package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// JobsPruneCommand deletes finished jobs older than an age.
type JobsPruneCommand struct{ m *Main }

// pruneJSON is the JSON output of spool jobs prune.
type pruneJSON struct {
	Deleted   int      `json:"deleted"`
	States    []string `json:"states"`
	OlderThan string   `json:"older_than"`
}

// Run implements cli.Command.
func (c *JobsPruneCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("jobs prune", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	var states cli.StringList
	fs.Var(&states, "state", "a finished state to prune (repeatable)")
	olderThan := fs.Duration("older-than", 0, "prune jobs finished longer ago than this")
	batch := fs.Int("batch", 10000, "jobs deleted per transaction")
	pause := fs.Duration("pause", 0, "pause between batches")
	asJSON := fs.Bool("json", false, "print a JSON object")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	p := spool.PruneParams{OlderThan: *olderThan, BatchSize: *batch, Pause: *pause}
	for _, s := range states {
		switch st := spool.JobState(s); st {
		case spool.JobStateCompleted, spool.JobStateDiscarded, spool.JobStateCancelled:
			p.States = append(p.States, st)
		default:
			return cli.Usagef("jobs prune", "--state %q: want completed, discarded or cancelled", s)
		}
	}
	switch {
	case len(pos) > 0:
		return cli.Usagef("jobs prune", "unexpected argument %q", pos[0])
	case len(p.States) == 0:
		return cli.Usagef("jobs prune", "--state is required (completed, discarded or cancelled; repeat it for several)")
	case *olderThan <= 0:
		return cli.Usagef("jobs prune", "--older-than is required and must be positive (24h, 30m)")
	case *batch < 1 || *batch > 100000:
		return cli.Usagef("jobs prune", "--batch must be between 1 and 100000")
	case *pause < 0:
		return cli.Usagef("jobs prune", "--pause must not be negative")
	}
	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	n, err := client.JobsPrune(ctx, p)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, pruneJSON{Deleted: n, States: states, OlderThan: olderThan.String()})
	}
	_, err = fmt.Fprintf(c.m.Stdout, "pruned %d %s jobs finished more than %s ago\n", n, strings.Join(states, "/"), *olderThan)
	return err
}

// Usage implements cli.Command.
func (c *JobsPruneCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs prune --state STATE --older-than DURATION [flags]

Deletes finished jobs (completed, discarded or cancelled) that finished
longer ago than --older-than, by the database's clock, in batches of --batch
jobs, each in a short transaction of its own, so that workers claiming at
the same time are not held up. Pending and running jobs are never touched.
Prints how many were deleted. Workers also prune on their own, by
Config.CompletedRetention, DiscardedRetention and CancelledRetention.

Flags:

	--state STATE
		completed, discarded or cancelled (required; repeat it for several)
	--older-than DURATION
		prune jobs finished longer ago than this, such as 24h (required)
	--batch N
		jobs deleted per transaction (default 10000)
	--pause DURATION
		wait this long between batches, leaving the database to the
		workers (default 0s: back to back)
	--json
		print {"deleted", "states", "older_than"}
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
