package spool

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// leases on it stay fenced out. Errors match ErrNotFound or ErrInvalidState;
// a connection fault matches ErrNotWritten (the retry did not happen) or
// ErrOutcomeUnknown (it may have: see JobGet).
func (c *Client) JobRetry(ctx context.Context, id int64) (*JobRow, error) {
	row, err := c.backend.JobRetry(ctx, &backend.JobRetryParams{ID: id})
	if err == nil {
		// The event first: woken, a worker may run the job and report its
		// outcome before the retry's event otherwise.
		c.events.retried(row)
		c.engine.Wake(row.Queue)
	}
	return row, err
}

// JobCancel cancels a pending or running job. A running job's context is
// cancelled (cause ErrLeaseLost) at once when this client runs it, in
// another process by the cancellation's wake-up, on every backend (a
// PostgreSQL notification, SQLite's and MySQL's cancellation events; well
// within a second on a machine with CPU to spare), or at its next
// heartbeat in a client with PollOnly set; its outcome is not written.
// Errors match ErrNotFound or ErrInvalidState (already finished); a
// connection fault matches ErrNotWritten (the job was not cancelled) or
// ErrOutcomeUnknown (it may have been: see JobGet), wrapping the cause.
func (c *Client) JobCancel(ctx context.Context, id int64) (*JobRow, error) {
	row, err := c.backend.JobCancel(ctx, &backend.JobCancelParams{ID: id})
	if err == nil {
		c.engine.Cancelled(id)
	}
	return row, err
}

// JobDelete deletes a job that is not running (cancel a running job first)
// and returns it as it was. Errors match ErrNotFound or ErrInvalidState; a
// connection fault matches ErrNotWritten or ErrOutcomeUnknown.
func (c *Client) JobDelete(ctx context.Context, id int64) (*JobRow, error) {
	return c.backend.JobDelete(ctx, &backend.JobDeleteParams{ID: id})
}

// ThroughputBucket counts the jobs that finished in one interval.
type ThroughputBucket = backend.ThroughputBucket

// JobThroughput counts the jobs of queue (every queue when empty) that
// finished in each bucket-wide interval of the last window, by the state
// they finished in, oldest first; intervals where none finished are left
// out. Only jobs still stored are counted: retention and CompletedRetention
// remove others. A window over 7 days or a bucket that is not a whole
// number of seconds is refused with ErrInvalidConfig.
func (c *Client) JobThroughput(ctx context.Context, queue string, window, bucket time.Duration) ([]ThroughputBucket, error) {
	p := &backend.JobThroughputParams{Window: window, Bucket: bucket, Queue: queue}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("job throughput: %w: %v", ErrInvalidConfig, err)
	}
	return c.backend.JobThroughput(ctx, p)
}

// QueueStats counts jobs by queue and state.
func (c *Client) QueueStats(ctx context.Context) ([]backend.QueueStats, error) {
	return c.backend.QueueStatsAll(ctx)
}

// QueuePause pauses a queue: no process claims its jobs until it is resumed,
// from the moment the pause commits (every claim checks it in the store, so
// a process that missed the news stops too). Running jobs run to their end.
// The pause is stored: it survives restarts. Pausing a paused queue is no
// error. A queue name that could never exist is refused with an
// *InvalidJobError for the field "queue". A connection fault matches
// ErrNotWritten or ErrOutcomeUnknown; pausing again is safe either way.
func (c *Client) QueuePause(ctx context.Context, queue string) error {
	return c.setPaused(ctx, queue, true)
}

// QueueResume resumes a paused queue; processes that listen for wake-ups
// claim from it at once, others at their next poll. Resuming a queue that is
// not paused is no error.
func (c *Client) QueueResume(ctx context.Context, queue string) error {
	return c.setPaused(ctx, queue, false)
}

func (c *Client) setPaused(ctx context.Context, queue string, paused bool) error {
	p := &backend.QueuePauseParams{Queue: queue, Paused: paused}
	if err := ValidateQueueName(queue); err != nil {
		return fmt.Errorf("%s queue: %w", p.Op(), err)
	}
	if err := c.backend.QueuePause(ctx, p); err != nil {
		return err
	}
	if paused {
		c.engine.Paused(queue)
	} else {
		c.engine.Wake(queue)
	}
	return nil
}

// QueuesPaused lists the paused queues and since when each is paused.
func (c *Client) QueuesPaused(ctx context.Context) ([]PausedQueue, error) {
	return c.backend.QueuePausedAll(ctx)
}

// PruneParams selects finished jobs to delete (Client.JobsPrune).
type PruneParams struct {
	// States are the finished states to prune: JobStateCompleted,
	// JobStateDiscarded, JobStateCancelled. At least one.
	States []JobState
	// OlderThan deletes jobs finished at least this long ago (by the store's
	// clock). Must be positive.
	OlderThan time.Duration
	// BatchSize is how many jobs one delete removes, each in a short
	// transaction of its own so that claims are never held up for long.
	// Defaults to 10,000.
	BatchSize int
	// Pause is how long to wait between batches, leaving the database to
	// the hot path: deleting at full speed competes with claims and
	// finishes for the server's CPU (BENCHMARKS.md, "Retention beside the
	// hot path"). Zero runs the batches back to back.
	Pause time.Duration
}

// JobsPrune deletes finished jobs of the given states that finished more
// than OlderThan ago, batch by batch until none is left or ctx ends, and
// returns how many it deleted (also when it stops on an error). Running and
// pending jobs are never touched. Bad parameters are refused with
// ErrInvalidConfig and delete nothing.
func (c *Client) JobsPrune(ctx context.Context, p PruneParams) (int, error) {
	if p.OlderThan <= 0 {
		return 0, fmt.Errorf("prune jobs: %w: OlderThan %s is not positive", ErrInvalidConfig, p.OlderThan)
	}
	if p.BatchSize == 0 {
		p.BatchSize = 10000
	}
	if p.Pause < 0 {
		return 0, fmt.Errorf("prune jobs: %w: Pause %s is negative", ErrInvalidConfig, p.Pause)
	}
	if p.BatchSize < 1 || p.BatchSize > 100000 {
		return 0, fmt.Errorf("prune jobs: %w: BatchSize %d is out of range 1..100000", ErrInvalidConfig, p.BatchSize)
	}
	cp := &backend.JobCleanupParams{Max: p.BatchSize}
	if len(p.States) == 0 {
		return 0, fmt.Errorf("prune jobs: %w: no state to prune (completed, discarded or cancelled)", ErrInvalidConfig)
	}
	for _, s := range p.States {
		switch s {
		case JobStateCompleted:
			cp.CompletedAge = p.OlderThan
		case JobStateDiscarded:
			cp.DiscardedAge = p.OlderThan
		case JobStateCancelled:
			cp.CancelledAge = p.OlderThan
		default:
			return 0, fmt.Errorf("prune jobs: %w: state %q is not a finished state (completed, discarded or cancelled)", ErrInvalidConfig, s)
		}
	}
	total := 0
	for {
		n, err := c.backend.JobCleanup(ctx, cp)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune jobs: %d deleted, then: %w", total, err)
		}
		if n < cp.Max {
			return total, nil
		}
		if p.Pause > 0 {
			t := time.NewTimer(p.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune jobs: %d deleted, then: %w", total, err)
		}
	}
}

// WorkOne claims the next due job of queue and runs it on the calling
// goroutine as a worker of this client would (its handler with the work
// middleware, timeout, panic recovery), then writes the outcome. It returns
// the job as stored afterwards, or an error matching ErrNotFound when no job
// of queue was due. The client need not be started; no heartbeat extends
// the job's lease unless it is, so the handler should take less than
// LeaseDuration. For tests (spooltest.Work) and tools.
func (c *Client) WorkOne(ctx context.Context, queue string) (*JobRow, error) {
	if err := ValidateQueueName(queue); err != nil {
		return nil, fmt.Errorf("work one job: %w", err)
	}
	row, err := c.engine.RunOne(ctx, queue)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("work one job: no job of queue %q is due: %w", queue, ErrNotFound)
	}
	after, err := c.backend.JobGet(ctx, row.ID)
	if errors.Is(err, ErrNotFound) && c.config.CompletedRetention < 0 {
		// Deleted as it completed (CompletedRetention negative).
		done := *row
		done.State, done.LeasedUntil, done.LeasedBy = JobStateCompleted, nil, ""
		return &done, nil
	}
	return after, err
}
