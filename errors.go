package spool

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Errors a caller can test for with errors.Is.
var (
	// ErrInvalidJob is matched by every *InvalidJobError.
	ErrInvalidJob = errors.New("invalid job")
	// ErrUnknownKind: no worker is registered for the kind being inserted.
	ErrUnknownKind = engine.ErrUnknownKind
	// ErrArgsTooLarge: the encoded args exceed Config.MaxArgsBytes.
	ErrArgsTooLarge = errors.New("args too large")
	// ErrArgsEncode: the args could not be encoded as JSON.
	ErrArgsEncode = errors.New("args do not encode as JSON")
	// ErrInvalidConfig: NewClient was given a config it cannot run with.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrNotFound: no job has the given id.
	ErrNotFound = backend.ErrNotFound
	// ErrInvalidState: the operation does not apply in the job's state.
	ErrInvalidState = backend.ErrInvalidState
	// ErrTxType: the transaction is not of a type the backend accepts.
	ErrTxType = backend.ErrTxType
	// ErrSchemaTooNew: the database was migrated by a newer spool.
	ErrSchemaTooNew = backend.ErrSchemaTooNew
	// ErrSchemaNotMigrated: the database has not been migrated.
	ErrSchemaNotMigrated = backend.ErrSchemaNotMigrated
	// ErrNotWritten: a write (an insert, JobCancel, JobRetry, JobDelete, a
	// bulk action's batch, a queue's pause or resume) failed on a
	// connection fault before it could commit; nothing was changed and
	// retrying is safe. The error wraps the driver's cause too.
	ErrNotWritten = backend.ErrNotWritten
	// ErrOutcomeUnknown: a write's connection failed after it was sent (in
	// its COMMIT, or while its reply was awaited); it may have committed.
	// Look before repeating one that is not idempotent: JobGet shows
	// whether a cancel or retry took effect; see docs/guarantees.md on
	// enqueueing idempotently. The error wraps the driver's cause too.
	ErrOutcomeUnknown = backend.ErrOutcomeUnknown
	// ErrUnavailable: reaching a store failed in a way that may pass by
	// itself (the server not running yet, restarting, out of connection
	// slots, its name not resolvable yet); backend.Open and Client.Start
	// try again after it until their context ends.
	ErrUnavailable = backend.ErrUnavailable
	// ErrUniqueConflict: retrying a unique job whose key a newer job holds.
	ErrUniqueConflict = backend.ErrUniqueConflict
	// ErrNotStarted / ErrAlreadyStarted: Start and Stop called out of order.
	ErrNotStarted     = engine.ErrNotStarted
	ErrAlreadyStarted = engine.ErrAlreadyStarted
	// ErrNoWorkers: Start was called on a client with no workers or queues.
	ErrNoWorkers = errors.New("client has no workers or no queues to work")
	// ErrLeaseLost is the context cause when a running job's lease was lost
	// (rescued after missed heartbeats, or cancelled by a user).
	ErrLeaseLost = engine.ErrLeaseLost
	// ErrClientStopping is the context cause of jobs cancelled by a hard stop.
	ErrClientStopping = engine.ErrClientStopping
)

// InvalidJobError reports a job that failed validation at insert; nothing was
// written. It matches ErrInvalidJob and, through Unwrap, a more specific
// sentinel when there is one (ErrUnknownKind, ErrArgsTooLarge, ErrArgsEncode).
type InvalidJobError struct {
	Field  string // "kind", "args", "queue", "priority", "max_attempts", "tags", "metadata", "run_at"
	Reason string
	Err    error
}

// Error implements error. Every Reason names its field in its own words
// ("priority -1 is out of range 0..100"), so the field is not repeated.
func (e *InvalidJobError) Error() string {
	return "invalid job: " + e.Reason
}

// Is makes every InvalidJobError match ErrInvalidJob.
func (e *InvalidJobError) Is(target error) bool { return target == ErrInvalidJob }

// Unwrap returns the specific cause, if any.
func (e *InvalidJobError) Unwrap() error { return e.Err }

func invalid(field string, err error, format string, args ...any) *InvalidJobError {
	return &InvalidJobError{Field: field, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Snooze, returned from Work, puts the job back to run again after d without
// using up an attempt.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &engine.OutcomeError{Outcome: backend.OutcomeSnooze, Delay: d}
}

// Cancel, returned from Work, cancels the job for good; err is recorded.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by worker")
	}
	return &engine.OutcomeError{Outcome: backend.OutcomeCancel, Err: err}
}

// Discard, returned from Work, discards the job now without further retries;
// err is recorded.
func Discard(err error) error {
	if err == nil {
		err = errors.New("discarded by worker")
	}
	return &engine.OutcomeError{Outcome: backend.OutcomeDiscard, Err: err}
}

// StopTimeoutError is returned by Client.Stop and Client.StopAndCancel when
// their context ended and, a short grace later, the stop had to leave
// something undone:
//
//   - Jobs: handlers that had still not returned. They ignore their
//     context, and Go cannot stop a goroutine from outside. The stop
//     recorded a retry for each of those jobs (delayed by one lease, so the
//     next attempt is unlikely to overlap the stuck handler) and returned
//     without waiting; the handlers' goroutines run on until they return,
//     and what they return then is not written.
//   - Unwritten: jobs whose outcome (a handler's result, the release of a
//     job claimed and not started, or the stop's retry of a stuck handler)
//     was not written by the end of the grace, because the store was slow
//     or unreachable, or the part of the client that held it (a queue's
//     claimer, blocked on the store) did not finish in time. The stop gave
//     up on the write, which may still have committed; if it did not, the
//     job stays running under its lease, and rescue returns it when the
//     lease ends, with its attempt counted (but for a job never started,
//     whose attempt rescue gives back) and the error "lease expired".
//   - Claims: claims of jobs whose reply the client never read, so that
//     which jobs they took is unknown: a claim still in flight when the
//     stop gave up (it may commit after Stop returns), or one whose reply
//     was lost earlier and whose release the stop could not write. Each
//     may hold up to Max jobs of its queue, leased to this client. Those
//     of a claim in flight go back to the queue when its reply comes (the
//     client releases them by the claim's ID then, within five seconds,
//     without holding anything up: Stop has returned); the others, and
//     those whose late release fails, run again only when their leases
//     end (or when the store's JobReleaseClaim releases them by the
//     claim's ID).
//
// A stop that returns the context's error alone left nothing undone: every
// outcome is written, and no job stays leased to the client.
// StopTimeoutError matches the context's error (context.DeadlineExceeded
// or context.Canceled) through errors.Is.
type StopTimeoutError struct {
	// Jobs are the jobs whose handler was still running, by id.
	Jobs []StuckJob
	// Unwritten are the ids of the jobs whose outcome the stop gave up
	// writing, in order.
	Unwritten []int64
	// Claims are the claims whose jobs the stop left leased to the client
	// without knowing which they are, by queue and ID.
	Claims []StopClaim
	// Err is the stop context's error.
	Err error
}

// StopUnreleasedError is returned by Client.Stop and Client.StopAndCancel
// when their context had not ended but the release of claims whose reply
// was lost failed (the store refused it or could not be reached): their
// jobs stay leased to this client, unseen, and run again only when their
// leases end (or when the store's JobReleaseClaim releases them by the
// claim's ID). Every outcome was written. It matches the release's error
// through errors.Is and errors.As.
type StopUnreleasedError struct {
	// Claims are the claims left, by queue and ID; none is InFlight.
	Claims []StopClaim
	// Err is the release's error.
	Err error
}

// Error implements error, naming up to ten claims.
func (e *StopUnreleasedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stop client: could not release %d claim(s) whose reply was lost; their jobs stay leased to this client until their leases end:", len(e.Claims))
	writeFirst(&b, len(e.Claims), func(i int) {
		c := e.Claims[i]
		fmt.Fprintf(&b, " claim %s of queue %q (up to %d job(s))", c.ID, c.Queue, c.Max)
	})
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the release's error.
func (e *StopUnreleasedError) Unwrap() error { return e.Err }

// StopClaim is a claim a stop gave up on before learning which jobs it
// took (StopTimeoutError.Claims).
type StopClaim struct {
	Queue string
	// ID is the claim's id, recorded as the lease holder of every job it
	// took (JobRow.LeasedBy); backend.Backend.JobReleaseClaim releases
	// them by it.
	ID string
	// Max is the most jobs the claim may hold: the number it asked for.
	Max int
	// InFlight: the claim's reply had not come when the stop gave up, and
	// it may commit after Stop returned. Otherwise the claim had failed
	// earlier with its reply lost (it may have committed), and its release
	// was not written.
	InFlight bool
}

// StuckJob is a job whose handler had not returned when a stop gave up.
type StuckJob struct {
	ID      int64
	Kind    string
	Attempt int
	// Running is how long the handler had run when the stop gave up.
	Running time.Duration
}

// Error implements error, naming up to ten jobs of each kind.
func (e *StopTimeoutError) Error() string {
	var b strings.Builder
	b.WriteString("stop client:")
	if len(e.Jobs) > 0 {
		fmt.Fprintf(&b, " %d job(s) still running after the stop's context ended (their handlers ignore cancellation):", len(e.Jobs))
		writeFirst(&b, len(e.Jobs), func(i int) {
			j := e.Jobs[i]
			fmt.Fprintf(&b, " job %d (kind %q, attempt %d, running %s)", j.ID, j.Kind, j.Attempt, j.Running.Round(time.Millisecond))
		})
		if len(e.Unwritten) > 0 {
			b.WriteByte(';')
		}
	}
	if len(e.Unwritten) > 0 {
		fmt.Fprintf(&b, " the outcomes of %d job(s) not written before the stop's grace ended (rescued when their leases end unless the write committed):", len(e.Unwritten))
		writeFirst(&b, len(e.Unwritten), func(i int) { fmt.Fprintf(&b, " job %d", e.Unwritten[i]) })
		if len(e.Claims) > 0 {
			b.WriteByte(';')
		}
	}
	if len(e.Claims) > 0 {
		fmt.Fprintf(&b, " %d claim(s) whose jobs are unknown:", len(e.Claims))
		writeFirst(&b, len(e.Claims), func(i int) {
			c := e.Claims[i]
			what, until := "reply lost, release not written", "held until their leases end"
			if c.InFlight {
				what, until = "in flight, its reply never came", "released when it comes"
			}
			fmt.Fprintf(&b, " claim %s of queue %q (%s: up to %d job(s), %s)", c.ID, c.Queue, what, c.Max, until)
		})
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// writeFirst writes items 0..n-1 with item, comma-separated, up to ten,
// then how many more there were.
func writeFirst(b *strings.Builder, n int, item func(i int)) {
	for i := range n {
		if i == 10 {
			fmt.Fprintf(b, " and %d more", n-i)
			return
		}
		if i > 0 {
			b.WriteByte(',')
		}
		item(i)
	}
}

// Unwrap returns the stop context's error.
func (e *StopTimeoutError) Unwrap() error { return e.Err }
