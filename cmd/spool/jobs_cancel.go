package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spoolq/spool"
)

// JobsCancelCommand cancels a pending or running job.
type JobsCancelCommand struct{ m *Main }

// Run implements Command.
func (c *JobsCancelCommand) Run(ctx context.Context, args []string) error {
	if bulkRequested(args) {
		return runBulk(ctx, c.m, "jobs cancel", c.Usage(), "cancelled", (*spool.Client).JobsCancel, args)
	}
	return runJobAction(ctx, c.m, "jobs cancel", c.Usage(), args,
		func(ctx context.Context, client *spool.Client, id int64) (*spool.JobRow, error) {
			job, err := client.JobCancel(ctx, id)
			if err != nil {
				return nil, explainJobChangeError(ctx, client, "cancel", id, err)
			}
			return job, nil
		},
		func(w io.Writer, job *spool.JobRow) error {
			_, err := fmt.Fprintf(w, "job %d cancelled\n", job.ID)
			return err
		})
}

// Usage implements Command.
func (c *JobsCancelCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs cancel [flags] ID
       spool jobs cancel FILTER FLAGS [flags]

Cancels a pending or running job. A running job's worker learns of it
within a second, and its handler's context is cancelled. Finished jobs
cannot be cancelled.

With filter flags instead of an id, cancels every pending and running job
that matches all of them, in batches, and prints how many it cancelled.
Example: spool jobs cancel --queue reports --state scheduled

Flags for one job:

	--json
		print the updated job as JSON
	--database-url URL
		database (default $SPOOL_DATABASE_URL)

Filter flags:
`+bulkUsage, "\n")
}
