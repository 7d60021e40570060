package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spoolq/spool"
)

// JobsRetryCommand makes a job that is not running available again now, with
// a fresh set of attempts (for example a discarded job).
type JobsRetryCommand struct{ m *Main }

// Run implements Command.
func (c *JobsRetryCommand) Run(ctx context.Context, args []string) error {
	if bulkRequested(args) {
		return runBulk(ctx, c.m, "jobs retry", c.Usage(), "retried", (*spool.Client).JobsRetry, args)
	}
	return runJobAction(ctx, c.m, "jobs retry", c.Usage(), args,
		func(ctx context.Context, client *spool.Client, id int64) (*spool.JobRow, error) {
			job, err := client.JobRetry(ctx, id)
			if err != nil {
				return nil, explainJobChangeError(ctx, client, "retry", id, err)
			}
			return job, nil
		},
		func(w io.Writer, job *spool.JobRow) error {
			_, err := fmt.Fprintf(w, "job %d retried: %s, attempt %d/%d, runs at %s\n",
				job.ID, job.State, job.Attempt, job.MaxAttempts, formatTime(job.RunAt))
			return err
		})
}

// Usage implements Command.
func (c *JobsRetryCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs retry [flags] ID
       spool jobs retry FILTER FLAGS [flags]

Makes a job available now with a fresh set of attempts: a discarded,
cancelled, completed or waiting job. A running job cannot be retried.

With filter flags instead of an id, retries every retryable, scheduled,
completed, discarded and cancelled job that matches all of them, in
batches, and prints how many it retried. Running it again changes nothing.
Example: spool jobs retry --state discarded --queue mail

Flags for one job:

	--json
		print the updated job as JSON
	--database-url URL
		database (default $SPOOL_DATABASE_URL)

Filter flags:
`+bulkUsage, "\n")
}
