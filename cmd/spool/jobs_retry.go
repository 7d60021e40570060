package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// JobsRetryCommand makes a job that is not running available again now, with
// a fresh set of attempts (for example a discarded job).
type JobsRetryCommand struct{ m *Main }

// Run implements Command.
func (c *JobsRetryCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("jobs retry", flag.ContinueOnError)
	dbURL := addDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	id, err := parseJobID("jobs retry", pos)
	if err != nil {
		return err
	}
	client, closeClient, err := openClient(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	job, err := client.JobRetry(ctx, id)
	if err != nil {
		return explainJobChangeError(ctx, client, "retry", id, err)
	}
	if *asJSON {
		return writeJSON(c.m.Stdout, toJobJSON(job))
	}
	fmt.Fprintf(c.m.Stdout, "job %d retried: %s, attempt %d/%d, runs at %s\n",
		job.ID, job.State, job.Attempt, job.MaxAttempts, formatTime(job.RunAt))
	return nil
}

// Usage implements Command.
func (c *JobsRetryCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs retry [flags] ID

Makes a job available now with a fresh set of attempts: a discarded,
cancelled, completed or waiting job. A running job cannot be retried.

Flags:

	--json
		print the updated job as JSON
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
