package spool

import (
	"context"

	"github.com/spoolq/spool/backend"
)

// JobGet returns a job by id, or an error matching ErrNotFound.
func (c *Client) JobGet(ctx context.Context, id int64) (*JobRow, error) {
	return c.backend.JobGet(ctx, id)
}

// JobListParams filters JobList. Zero values do not filter.
type JobListParams = backend.JobListParams

// JobList lists jobs in id order.
func (c *Client) JobList(ctx context.Context, p *JobListParams) ([]*JobRow, error) {
	if p == nil {
		p = &JobListParams{}
	}
	return c.backend.JobList(ctx, p)
}

// JobRetry makes a job that is not running available now with a fresh set of
// attempts (for example a discarded job, from the dead-letter view). Old
// leases on it stay fenced out. Errors match ErrNotFound or ErrInvalidState.
func (c *Client) JobRetry(ctx context.Context, id int64) (*JobRow, error) {
	row, err := c.backend.JobRetry(ctx, &backend.JobRetryParams{ID: id})
	if err == nil {
		c.engine.Wake(row.Queue)
	}
	return row, err
}

// JobCancel cancels a pending or running job. A running job's context is
// cancelled (cause ErrLeaseLost) at once when its client listens for
// notifications, else at its next heartbeat; its outcome is not written.
// Errors match ErrNotFound or ErrInvalidState (already finished).
func (c *Client) JobCancel(ctx context.Context, id int64) (*JobRow, error) {
	return c.backend.JobCancel(ctx, &backend.JobCancelParams{ID: id})
}

// QueueStats counts jobs by queue and state.
func (c *Client) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	return c.backend.QueueStatsAll(ctx)
}
