package spool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobFilter selects jobs for a bulk action. Every field given must match;
// at least one must be given, so that no bulk action touches every job by
// accident.
type JobFilter struct {
	Queue  string
	Kind   string
	States []JobState
	// CreatedAfter and CreatedBefore bound the jobs' insert time
	// (exclusive); zero means no bound.
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// BatchSize is how many jobs one transaction changes, 1 to 10,000.
	// Defaults to 1,000.
	BatchSize int
}

// BulkResult reports a bulk action.
type BulkResult struct {
	// Changed counts the jobs the action changed.
	Changed int
	// UniqueConflicts counts unique jobs not retried because a newer job
	// holds their key (see ErrUniqueConflict).
	UniqueConflicts int
}

// JobsRetry makes the matching retryable, scheduled, completed, discarded
// and cancelled jobs available now with a fresh set of attempts, as JobRetry
// does one by one. Pending-now and running jobs are left alone, so running
// it twice changes nothing the second time. A connection fault ends it
// with an error matching ErrNotWritten or ErrOutcomeUnknown for the batch
// in flight; the jobs of earlier batches are counted in Changed.
func (c *Client) JobsRetry(ctx context.Context, f JobFilter) (BulkResult, error) {
	return c.bulk(ctx, backend.BulkRetry, f)
}

// JobsCancel cancels the matching pending and running jobs, as JobCancel
// does one by one: a running job's handler is cancelled as JobCancel
// describes.
func (c *Client) JobsCancel(ctx context.Context, f JobFilter) (BulkResult, error) {
	return c.bulk(ctx, backend.BulkCancel, f)
}

// JobsDelete deletes the matching jobs that are not running, not waiting
// and not waited on by others (a workflow task or batch member whose
// dependents have not been settled), as JobDelete refuses them.
func (c *Client) JobsDelete(ctx context.Context, f JobFilter) (BulkResult, error) {
	return c.bulk(ctx, backend.BulkDelete, f)
}

// bulk runs an action batch by batch, each in a short transaction of its
// own, resuming after the last job the previous batch took, until a batch
// takes none or ctx ends. It returns what it changed, also on an error.
// Bad filters are refused with ErrInvalidConfig and change nothing. A
// connection fault ends it with an error matching ErrNotWritten (the batch
// in flight changed nothing) or ErrOutcomeUnknown (it may have been
// applied, and is not counted in Changed); running the action again is
// safe either way, since it changes only jobs still to change.
func (c *Client) bulk(ctx context.Context, action backend.BulkAction, f JobFilter) (BulkResult, error) {
	var res BulkResult
	fail := func(err error) (BulkResult, error) {
		return res, fmt.Errorf("%s jobs: %d changed, then: %w", action, res.Changed, err)
	}
	p := &backend.JobBulkParams{Action: action, Queue: f.Queue, Kind: f.Kind, States: f.States,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, Max: f.BatchSize}
	if err := checkFilter(&f, p); err != nil {
		return res, fmt.Errorf("%s jobs: %w", action, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		batch, err := c.backend.JobBulk(ctx, p)
		if err != nil {
			return fail(err)
		}
		res.Changed += batch.Changed
		for _, id := range batch.UniqueRetries {
			_, err := c.backend.JobRetry(ctx, &backend.JobRetryParams{ID: id})
			if err := res.countRetry(err); err != nil {
				return fail(err)
			}
		}
		if batch.Taken == 0 {
			break
		}
		p.AfterID = batch.LastID
	}
	if action == backend.BulkCancel && res.Changed > 0 {
		c.engine.Cancelled(0)
	}
	if action == backend.BulkRetry && res.Changed > 0 {
		if f.Queue != "" {
			c.engine.Wake(f.Queue)
		} else {
			c.engine.WakeAll()
		}
	}
	return res, nil
}

// countRetry counts the outcome of one job's retry: retried, or left
// because a newer job holds its key; a job changed by someone else since
// it was read (gone, or in a state that takes no retry) is left alone.
// Any other error is returned.
func (r *BulkResult) countRetry(err error) error {
	switch {
	case err == nil:
		r.Changed++
	case errors.Is(err, ErrUniqueConflict):
		r.UniqueConflicts++
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalidState):
	default:
		return err
	}
	return nil
}

// checkFilter validates a filter and sets the batch size's default.
func checkFilter(f *JobFilter, p *backend.JobBulkParams) error {
	if f.Queue == "" && f.Kind == "" && len(f.States) == 0 && f.CreatedAfter.IsZero() && f.CreatedBefore.IsZero() {
		return fmt.Errorf("%w: no filter given (queue, kind, states or a time range)", ErrInvalidConfig)
	}
	if f.Queue != "" {
		if err := ValidateQueueName(f.Queue); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	for _, s := range f.States {
		if !s.Valid() {
			return fmt.Errorf("%w: %q is not a job state", ErrInvalidConfig, s)
		}
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return fmt.Errorf("%w: CreatedAfter %s is not before CreatedBefore %s", ErrInvalidConfig, f.CreatedAfter, f.CreatedBefore)
	}
	if p.Max == 0 {
		p.Max = backend.DefaultBulkMax
	}
	if p.Max < 1 || p.Max > 10000 {
		return fmt.Errorf("%w: BatchSize %d is out of range 1..10000", ErrInvalidConfig, f.BatchSize)
	}
	return nil
}
