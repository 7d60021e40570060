package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// JobsCancelCommand cancels a pending or running job.
type JobsCancelCommand struct{ m *Main }

// Run implements Command.
func (c *JobsCancelCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("jobs cancel", flag.ContinueOnError)
	dbURL := addDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	id, err := parseJobID("jobs cancel", pos)
	if err != nil {
		return err
	}
	client, closeClient, err := openClient(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	job, err := client.JobCancel(ctx, id)
	if err != nil {
		return explainJobChangeError(ctx, client, "cancel", id, err)
	}
	if *asJSON {
		return writeJSON(c.m.Stdout, toJobJSON(job))
	}
	fmt.Fprintf(c.m.Stdout, "job %d cancelled\n", job.ID)
	return nil
}

// Usage implements Command.
func (c *JobsCancelCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs cancel [flags] ID

Cancels a pending or running job. A running job's worker learns of it at its
next heartbeat, and its context is cancelled. Finished jobs cannot be
cancelled.

Flags:

	--json
		print the updated job as JSON
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
