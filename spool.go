// Package spool is a durable job queue that lives in the database an
// application already runs.
//
// Jobs are rows: enqueueing can join the application's transaction
// (InsertTx), and a queue needs no new infrastructure. Workers are typed: a
// Worker[T] handles jobs whose args are of type T, registered by T's Kind.
//
//	type SendEmail struct{ To string `json:"to"` }
//	func (SendEmail) Kind() string { return "send_email" }
//
//	workers := spool.NewWorkers()
//	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, j *spool.Job[SendEmail]) error {
//		return mailer.Send(ctx, j.Args.To)
//	}))
//	client, err := spool.NewClient(be, &spool.Config{Workers: workers,
//		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 50}}})
//	client.Start(ctx)
//	client.Insert(ctx, SendEmail{To: "a@example.com"}, nil)
//
// Guarantees: at-least-once execution under leases on the database clock;
// every write about a claimed job is fenced by its lease, so a late worker
// never overwrites a newer attempt and a completed job never runs again;
// effects written with CompleteTx commit together with the completion.
package spool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spoolq/spool/backend"
)

// DefaultQueue is the queue jobs go to unless told otherwise.
const DefaultQueue = "default"

// JobArgs is the payload of a job. Kind names the job type; it must be unique
// among the registered workers and stable across deployments, since it is
// stored with every job.
type JobArgs interface {
	Kind() string
}

// JobArgsWithInsertOpts lets an args type supply default insert options;
// options given at insert take precedence field by field.
type JobArgsWithInsertOpts interface {
	JobArgs
	InsertOpts() InsertOpts
}

// JobRow is a job as stored, without decoded args.
type JobRow = backend.JobRow

// PausedQueue is a paused queue and when it was paused (see Client.QueuePause).
type PausedQueue = backend.PausedQueue

// JobState is a job's lifecycle state.
type JobState = backend.State

// AttemptError is one entry of a job's error history.
type AttemptError = backend.AttemptError

// Job states, re-exported from package backend.
const (
	JobStateWaiting   = backend.StateWaiting
	JobStateAvailable = backend.StateAvailable
	JobStateScheduled = backend.StateScheduled
	JobStateRetryable = backend.StateRetryable
	JobStateRunning   = backend.StateRunning
	JobStateCompleted = backend.StateCompleted
	JobStateDiscarded = backend.StateDiscarded
	JobStateCancelled = backend.StateCancelled
)

// Job is a claimed job with its decoded args, as a worker sees it.
type Job[T JobArgs] struct {
	*JobRow
	// Args is the decoded payload.
	Args T
}

// Worker works jobs whose args are of type T. Work's context is cancelled
// when the job times out, when its lease is lost or it is cancelled, and on a
// hard stop; context.Cause tells which.
//
// Work's result decides what happens to the job: nil completes it; Snooze,
// Cancel and Discard do what they say; any other error fails the attempt,
// which is retried after a backoff until MaxAttempts, then discarded. A panic
// is recovered and counts as a failed attempt, with its stack recorded.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkerTimeout is an optional Worker method: the job's timeout, overriding
// Config.JobTimeout. Zero uses the default; a negative value means none.
type WorkerTimeout[T JobArgs] interface {
	Timeout(job *Job[T]) time.Duration
}

// WorkerNextRetry is an optional Worker method: the backoff before the next
// attempt, overriding Config.RetryPolicy.
type WorkerNextRetry[T JobArgs] interface {
	NextRetry(job *Job[T]) time.Duration
}

// WorkFunc adapts a function to a Worker.
func WorkFunc[T JobArgs](f func(ctx context.Context, job *Job[T]) error) Worker[T] {
	return workFunc[T](f)
}

type workFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work implements Worker.
func (f workFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// rawArgs is used to insert a job by kind with already-encoded args (the CLI).
type rawArgs struct {
	kind string
	args json.RawMessage
}

// Kind implements JobArgs.
func (r rawArgs) Kind() string { return r.kind }

// MarshalJSON returns the args exactly as given.
func (r rawArgs) MarshalJSON() ([]byte, error) { return r.args, nil }

// RawArgs returns JobArgs of the given kind whose JSON encoding is args as
// given. It is meant for tools that enqueue jobs of kinds they do not define.
func RawArgs(kind string, args json.RawMessage) JobArgs { return rawArgs{kind: kind, args: args} }
