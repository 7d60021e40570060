package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/flow"
)

// Config is what the engine runs with. The caller (spool.NewClient) has
// validated it and filled in every default.
type Config struct {
	ClientID           string
	LeaseDuration      time.Duration
	PollInterval       time.Duration
	FlowPollInterval   time.Duration // a flow-held queue's next look
	PollOnly           bool          // no wake-up subscription even if the backend offers one
	CompletionBatchMax int
	CompletionDelay    time.Duration
	// JobTimeout applies to handlers whose worker sets none; negative: none.
	JobTimeout      time.Duration
	DeleteCompleted bool // completed jobs are deleted as they complete
	Queues          map[string]Queue
	// Handler returns how to run jobs of a kind, false when none is known.
	Handler func(kind string) (Handler, bool)
	// Many returns the grouping rules of a kind whose handler takes many
	// jobs in one call (nil: one job per run, or Many itself nil). The
	// producer asks it for every job it starts, so it must be cheap.
	Many func(kind string) *ManyRules
	// NextRetry is the backoff after a failed attempt (1 after the first run)
	// for handlers that do not choose their own.
	NextRetry func(attempt int) time.Duration
	// Outcome is called, when not nil, for every outcome of a handler's run
	// that the store applied, after the write: on the outcome writer's
	// goroutine, so it must not block.
	Outcome func(Outcome)
	// Observer, when not nil, receives measurements (its funcs run on the
	// goroutine that measured and must not block).
	Observer *Observer
	// Services run beside the engine from Start until the end of Stop (the
	// maintenance loop); their context ends then.
	Services []func(ctx context.Context)
	// AfterStop runs at the end of a stop that still had time, before the
	// stop reports done (the maintenance leader resigns there).
	AfterStop func(ctx context.Context)
}

// Observer are the engine's measurement hooks; a nil *Observer measures
// nothing.
type Observer struct {
	Claimed    func(queue string, jobs int, took time.Duration, err error)
	Started    func(row *backend.JobRow, startedAt time.Time)
	LeasesLost func(queue string, n int)
	Rescued    func(retried, discarded int)
	Notifier   func(up bool)
}

// RescuedFunc is o.Rescued, nil for a nil o (for the maintenance config).
func (o *Observer) RescuedFunc() func(retried, discarded int) {
	if o == nil {
		return nil
	}
	return o.Rescued
}

func (o *Observer) claimed(queue string, jobs int, took time.Duration, err error) {
	if o != nil {
		o.Claimed(queue, jobs, took, err)
	}
}

func (o *Observer) started(row *backend.JobRow, at time.Time) {
	if o != nil {
		o.Started(row, at)
	}
}

func (o *Observer) leasesLost(queue string, n int) {
	if o != nil && n > 0 {
		o.LeasesLost(queue, n)
	}
}

func (o *Observer) notifier(up bool) {
	if o != nil {
		o.Notifier(up)
	}
}

// Queue is one queue's concurrency.
type Queue struct {
	MaxWorkers int
	Prefetch   int // claimed jobs that may wait for a free worker; 0: none
	// Flow, when set, makes the queue's claims flow-controlled
	// (backend.JobClaimFlow, decided by internal/flow), without prefetch.
	Flow *flow.Rules
}

// Handler runs the jobs of one kind.
type Handler struct {
	// Run decodes the row's args and works the job. It returns a
	// *DecodeError when the args do not decode, an *OutcomeError for an
	// outcome other than success or retry.
	Run func(ctx context.Context, row *backend.JobRow) error
	// Timeout is the handler's own timeout for the row; 0: Config.JobTimeout.
	Timeout func(row *backend.JobRow) time.Duration
	// NextRetry is the handler's own backoff; false: Config.NextRetry.
	NextRetry func(row *backend.JobRow) (time.Duration, bool)
	// RunMany, for a kind registered to take many jobs, works the rows of
	// one call (many.go) and returns one result per row, in their order,
	// each read as Run's result (nil: completed). Run then works a single
	// row alone (Engine.RunOne).
	RunMany func(ctx context.Context, rows []*backend.JobRow) []error
}

// Errors of the engine; package spool exports them under the same names.
var (
	ErrUnknownKind    = errors.New("no worker registered for kind")
	ErrNotStarted     = errors.New("client not started")
	ErrAlreadyStarted = errors.New("client already started")
	ErrLeaseLost      = errors.New("job lease lost or job cancelled")
	ErrClientStopping = errors.New("client stopping")
)

// errJobTimeout is the context cause when a job runs past its timeout; it
// matches context.DeadlineExceeded.
var errJobTimeout error = jobTimeoutError{}

type jobTimeoutError struct{}

func (jobTimeoutError) Error() string { return "job timed out" }

// Is makes the cause match context.DeadlineExceeded, as a context's own
// deadline would.
func (jobTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// OutcomeError, returned by a handler, asks for an outcome other than
// success or retry: snooze, cancel or discard.
type OutcomeError struct {
	Outcome backend.Outcome
	Delay   time.Duration // OutcomeSnooze
	Err     error         // recorded in the job's error history when not nil
}

// Error implements error.
func (e *OutcomeError) Error() string {
	switch e.Outcome {
	case backend.OutcomeSnooze:
		return fmt.Sprintf("snooze for %s", e.Delay)
	case backend.OutcomeCancel:
		return fmt.Sprintf("cancel: %v", e.Err)
	default:
		return fmt.Sprintf("discard: %v", e.Err)
	}
}

// Unwrap returns the error recorded with the outcome.
func (e *OutcomeError) Unwrap() error { return e.Err }

// DecodeError marks args that do not decode into the registered type; such a
// job is discarded, since no retry can fix it.
type DecodeError struct{ Err error }

// Error implements error.
func (e *DecodeError) Error() string { return "decode args: " + e.Err.Error() }

// Unwrap returns the decoding error.
func (e *DecodeError) Unwrap() error { return e.Err }

// panicError is a recovered panic in a handler.
type panicError struct {
	value any
	stack string
}

// Error implements error.
func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// GaveUpError is returned by Stop when its context ended and, a grace
// later, handlers still ran (they ignore their context) or outcomes were
// still unwritten (see spool.StopTimeoutError).
type GaveUpError struct {
	Jobs []StuckJob // by id
	// Unwritten are the jobs, by id, whose outcome (or the stop's retry of
	// a stuck handler, or the release of a job claimed and not started)
	// the stop gave up writing.
	Unwritten []int64
	// Claims are the claims whose jobs the stop left leased to this
	// client without knowing which they are, by queue and id.
	Claims []ClaimLeft
	Err    error // the stop context's error
}

// addUnwritten adds ids to Unwritten, keeping it sorted and without
// duplicates.
func (e *GaveUpError) addUnwritten(ids []int64) {
	e.Unwritten = append(e.Unwritten, ids...)
	slices.Sort(e.Unwritten)
	e.Unwritten = slices.Compact(e.Unwritten)
}

// StuckJob is a job whose handler had not returned when a stop gave up.
type StuckJob struct {
	ID      int64
	Kind    string
	Attempt int
	Running time.Duration
}

// Error implements error.
func (e *GaveUpError) Error() string {
	return fmt.Sprintf("stop gave up on %d job(s) whose handler ignores its context, %d outcome(s) not yet written and %d claim(s) whose jobs are unknown: %v",
		len(e.Jobs), len(e.Unwritten), len(e.Claims), e.Err)
}

// Unwrap returns the stop context's error.
func (e *GaveUpError) Unwrap() error { return e.Err }

// UnreleasedError is returned by a Stop that had time when the release of
// claims whose reply was lost failed (see spool.StopUnreleasedError).
type UnreleasedError struct {
	Claims []ClaimLeft // by queue and id; none InFlight
	Err    error       // the release's error
}

// Error implements error.
func (e *UnreleasedError) Error() string {
	return fmt.Sprintf("stop could not release %d claim(s) whose reply was lost: %v", len(e.Claims), e.Err)
}

// Unwrap returns the release's error.
func (e *UnreleasedError) Unwrap() error { return e.Err }

// Result is what an outcome does to its job, as logs and events name it.
type Result uint8

// Results of a run.
const (
	ResultNone      Result = iota // nothing to report (a release)
	ResultCompleted               // the handler succeeded
	ResultFailed                  // the attempt failed; the job runs again
	ResultExhausted               // the last attempt failed: the store discards the job
	ResultDiscarded               // the handler discarded the job
	ResultCancelled               // the handler cancelled the job
	ResultSnoozed                 // the handler snoozed the job
)

// ResultOf classifies the outcome f of a run at attempt of maxAttempts.
func ResultOf(f *backend.JobFinish, attempt, maxAttempts int16) Result {
	switch f.Outcome {
	case backend.OutcomeComplete:
		return ResultCompleted
	case backend.OutcomeRetry:
		if attempt >= maxAttempts {
			return ResultExhausted
		}
		return ResultFailed
	case backend.OutcomeDiscard:
		return ResultDiscarded
	case backend.OutcomeCancel:
		return ResultCancelled
	case backend.OutcomeSnooze:
		return ResultSnoozed
	}
	return ResultNone
}

// Outcome is an outcome of a handler's run, written.
type Outcome struct {
	Result      Result
	Finish      backend.JobFinish
	Kind        string
	Queue       string
	Attempt     int16
	MaxAttempts int16
	// Duration is how long the handler ran.
	Duration time.Duration
}
