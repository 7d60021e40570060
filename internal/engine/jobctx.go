package engine

import (
	"context"
	"time"

	"github.com/spoolq/spool/backend"
)

// jobContext is the context a handler runs in: a single cancelable context
// per job, which carries the job's Run and reports its deadline. Every end
// of a job's run is a cause of cancelling it: its timeout (errJobTimeout),
// a lost lease or a cancellation (ErrLeaseLost), a hard stop
// (ErrClientStopping), the handler's return.
//
// A context per cause (WithCancelCause under a client-wide parent, then
// WithTimeoutCause, then WithValue) costs three allocations per job, a
// children map, and every job registering with and leaving the one parent
// under its lock (BENCHMARKS.md, "One context per job"). This one
// registers with nothing (its parent
// is never cancelled), and its timeout is no timer of its own: the running
// set's one timer ends it.
type jobContext struct {
	context.Context // context.WithCancelCause of a parent never cancelled
	deadline        time.Time
	run             Run
	// running is the job's entry in the running set, allocated with its
	// context: one allocation per job fewer.
	running runningJob
}

// newJobContext returns the context of row's run, started at startedAt,
// whose deadline is timeout later (0: none), and its cancel function. The
// running set ends the run at its deadline (runningJobs.expire), with
// errJobTimeout.
func newJobContext(parent context.Context, be backend.Backend, row *backend.JobRow, startedAt time.Time, timeout time.Duration) (*jobContext, context.CancelCauseFunc) {
	inner, cancel := context.WithCancelCause(parent)
	c := &jobContext{Context: inner, run: Run{be: be, lease: row.Lease(), metadata: row.Metadata, startedAt: startedAt}}
	if timeout > 0 {
		c.deadline = startedAt.Add(timeout)
	}
	return c, cancel
}

// Deadline reports when the job's timeout ends its run.
func (c *jobContext) Deadline() (time.Time, bool) {
	return c.deadline, !c.deadline.IsZero()
}

// Err is context.DeadlineExceeded once the timeout ended the run, as for a
// context with a deadline; contexts the handler derives from it see
// context.Canceled then, with errJobTimeout (which matches
// context.DeadlineExceeded) as their cause.
func (c *jobContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == errJobTimeout {
		return context.DeadlineExceeded
	}
	return err
}

// Value returns the job's Run for its key and the parent's values
// otherwise.
func (c *jobContext) Value(key any) any {
	if key == (runKey{}) {
		return &c.run
	}
	return c.Context.Value(key)
}
