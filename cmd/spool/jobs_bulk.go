package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// bulkFilterFlags are the flags that make retry and cancel act on every job
// a filter selects instead of on one id.
var bulkFilterFlags = []string{"state", "queue", "kind", "created-after", "created-before", "batch"}

// bulkRequested reports whether args name a filter flag.
func bulkRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if name == a {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		for _, f := range bulkFilterFlags {
			if name == f {
				return true
			}
		}
	}
	return false
}

// bulkJSON is the JSON output of a bulk action.
type bulkJSON struct {
	Action          string `json:"action"`
	Changed         int    `json:"changed"`
	UniqueConflicts int    `json:"unique_conflicts"`
}

// runBulk runs retry, cancel or delete over the jobs the filter flags
// select, and prints how many it changed.
func runBulk(ctx context.Context, m *Main, name, usage, done string,
	act func(*spool.Client, context.Context, spool.JobFilter) (spool.BulkResult, error), args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	var states cli.StringList
	fs.Var(&states, "state", "job state (repeatable)")
	queue := fs.String("queue", "", "queue")
	kind := fs.String("kind", "", "job kind")
	after := fs.String("created-after", "", "only jobs inserted after this RFC 3339 time")
	before := fs.String("created-before", "", "only jobs inserted before this RFC 3339 time")
	batch := fs.Int("batch", 1000, "jobs changed per transaction")
	asJSON := fs.Bool("json", false, "print a JSON object")
	pos, err := cli.ParseFlags(fs, args, usage)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef(name, "give a job id or filter flags, not both (unexpected argument %q)", pos[0])
	}
	f := spool.JobFilter{Queue: *queue, Kind: *kind, BatchSize: *batch}
	for _, s := range states {
		st := spool.JobState(s)
		if !st.Valid() {
			return cli.Usagef(name, "--state %q is not a job state (available, scheduled, retryable, running, completed, discarded, cancelled)", s)
		}
		f.States = append(f.States, st)
	}
	for _, t := range []struct {
		flag, value string
		into        *time.Time
	}{{"created-after", *after, &f.CreatedAfter}, {"created-before", *before, &f.CreatedBefore}} {
		if t.value == "" {
			continue
		}
		if *t.into, err = time.Parse(time.RFC3339, t.value); err != nil {
			return cli.Usagef(name, "--%s %q is not an RFC 3339 time like 2030-01-02T15:04:05Z", t.flag, t.value)
		}
	}
	switch {
	case f.Queue == "" && f.Kind == "" && len(f.States) == 0 && f.CreatedAfter.IsZero() && f.CreatedBefore.IsZero():
		return cli.Usagef(name, "give at least one filter (--state, --queue, --kind, --created-after, --created-before)")
	case *batch < 1 || *batch > 10000:
		return cli.Usagef(name, "--batch must be between 1 and 10000")
	case f.Queue != "":
		if err := spool.ValidateQueueName(f.Queue); err != nil {
			return cli.Usagef(name, "--queue: %v", err)
		}
	}
	client, closeClient, err := openClient(ctx, m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := act(client, ctx, f)
	if err != nil {
		// Every bulk action changes only the jobs still to change, so
		// running it again is safe whatever became of the batch in flight.
		return explainWriteFault(err, "", true)
	}
	action := strings.TrimPrefix(name, "jobs ")
	if *asJSON {
		return cli.WriteJSON(m.Stdout, bulkJSON{Action: action, Changed: res.Changed, UniqueConflicts: res.UniqueConflicts})
	}
	fmt.Fprintf(m.Stdout, "%s %d jobs\n", done, res.Changed)
	if res.UniqueConflicts > 0 {
		fmt.Fprintf(m.Stdout, "%d unique jobs left as they were: a newer job holds their unique key\n", res.UniqueConflicts)
	}
	return nil
}

// bulkUsage is the flags part of the bulk commands' usage.
const bulkUsage = `
	--state STATE
		only jobs in this state; repeat for several
	--queue NAME
		only jobs of this queue
	--kind KIND
		only jobs of this kind
	--created-after TIME, --created-before TIME
		only jobs inserted after or before this RFC 3339 time
	--batch N
		jobs changed per transaction, 1 to 10000 (default 1000)
	--json
		print {"action": …, "changed": …, "unique_conflicts": …}
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`

// JobsDeleteCommand deletes the jobs a filter selects.
type JobsDeleteCommand struct{ m *Main }

// Run implements Command.
func (c *JobsDeleteCommand) Run(ctx context.Context, args []string) error {
	return runBulk(ctx, c.m, "jobs delete", c.Usage(), "deleted", (*spool.Client).JobsDelete, args)
}

// Usage implements Command.
func (c *JobsDeleteCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs delete FILTER FLAGS [flags]

Deletes every job that matches all the filters given, except running jobs
(cancel those first), in batches of short transactions, and prints how many
it deleted. At least one filter is required. Example:

	spool jobs delete --state discarded --queue mail --created-before 2030-01-01T00:00:00Z

Flags:
`+bulkUsage, "\n")
}
