// Package backend defines the domain-level interface between Spool's runtime
// and a job store. It contains no SQL: a store that is not a SQL database can
// implement it. Each method takes a context and a params struct so that fields
// can be added without breaking implementations.
//
// Contract shared by all methods:
//   - Times that decide ownership (lease ends, retry times) are passed as
//     durations; the backend adds them to its own clock.
//   - Writes about a claimed job carry a LeaseRef and are applied only while
//     the job is running under that fence; rejected references are reported,
//     never an error.
//   - Errors are wrapped with the operation and may wrap the sentinels below.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Sentinel errors shared by every backend.
var (
	// ErrNotFound means no job has the given id.
	ErrNotFound = errors.New("job not found")
	// ErrSchemaTooNew means the store was migrated by a newer Spool than this one.
	ErrSchemaTooNew = errors.New("schema is newer than this version of spool")
	// ErrSchemaNotMigrated means the store has not been migrated yet.
	ErrSchemaNotMigrated = errors.New("schema is not migrated (run spool migrate)")
	// ErrNoWakeUps, from Notifier.Listen, means the store cannot deliver
	// wake-ups on this connection at all (a LISTEN through a transaction
	// pooler succeeds and then hears nothing): trying again cannot help,
	// and the client polls instead.
	ErrNoWakeUps = errors.New("wake-ups cannot reach this client")
	// ErrTxType means a transaction of a type the backend cannot use was passed.
	ErrTxType = errors.New("unsupported transaction type for this backend")
	// ErrInvalidState means the operation does not apply to the job's current state.
	ErrInvalidState = errors.New("operation not allowed in the job's current state")
	// ErrNotWritten marks a failed write that cannot have committed: the
	// connection failed before the statement reached the server (or the
	// transaction it was part of never reached its commit). Retrying it
	// cannot duplicate anything.
	ErrNotWritten = errors.New("not written: the database connection failed before the write could commit; retrying is safe")
	// ErrOutcomeUnknown marks a failed write that may have committed: the
	// connection failed after the statement (or its commit) was sent, so the
	// server may have applied it without the reply arriving. A retry may
	// duplicate it; check first, or make the write idempotent.
	ErrOutcomeUnknown = errors.New("outcome unknown: the database connection failed after the write was sent, so it may have committed")
	// ErrUniqueConflict means a change would give a job a unique key that
	// another job holds (retrying a finished unique job whose key was taken
	// by a newer job).
	ErrUniqueConflict = errors.New("another job holds this job's unique key")
)

// State is the lifecycle state of a job.
type State string

// Job states. Available, Scheduled and Retryable are pending: a claim takes a
// pending job once its RunAt has come. Waiting is not pending: a waiting job
// waits for something other than time (WaitKind names it), no claim ever
// reads it, and it leaves the state only in the transaction that causes it
// (the finish of its last dependency, a batch becoming final).
const (
	StateWaiting   State = "waiting"
	StateAvailable State = "available"
	StateScheduled State = "scheduled"
	StateRetryable State = "retryable"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateDiscarded State = "discarded"
	StateCancelled State = "cancelled"
)

// AllStates lists every state in lifecycle order.
var AllStates = []State{StateWaiting, StateAvailable, StateScheduled, StateRetryable, StateRunning, StateCompleted, StateDiscarded, StateCancelled}

// uniqueBitStates are the states a UniqueStates set has a bit for, bit 0
// first. Waiting has none: a job with a unique key never waits (the client
// refuses one), so the stored sets (and the stores' unique indexes) keep
// the seven bits they had.
var uniqueBitStates = []State{StateAvailable, StateScheduled, StateRetryable, StateRunning, StateCompleted, StateDiscarded, StateCancelled}

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if s == v {
			return true
		}
	}
	return false
}

// UniqueStates is a set of states, one bit per state from available to
// cancelled in lifecycle order (bit 0 is available; waiting has no bit). A unique job holds its key while its state is in its
// set.
type UniqueStates uint8

// UniqueStatesOf returns the set of the given states.
func UniqueStatesOf(states ...State) UniqueStates {
	var u UniqueStates
	for _, s := range states {
		for i, v := range uniqueBitStates {
			if s == v {
				u |= 1 << i
			}
		}
	}
	return u
}

// UniqueStatesRequired are the states every unique job holds its key in:
// a job moves among them without a new insert (a retry, a snooze, a rescue),
// so a set without one of them would let two jobs hold one key.
var UniqueStatesRequired = UniqueStatesOf(StateAvailable, StateScheduled, StateRetryable, StateRunning)

// Has reports whether s is in u.
func (u UniqueStates) Has(s State) bool {
	for i, v := range uniqueBitStates {
		if s == v {
			return u&(1<<i) != 0
		}
	}
	return false
}

// States lists the states of u in lifecycle order.
func (u UniqueStates) States() []State {
	var out []State
	for i, v := range uniqueBitStates {
		if u&(1<<i) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// MarshalJSON writes u as a list of state names.
func (u UniqueStates) MarshalJSON() ([]byte, error) {
	states := u.States()
	if states == nil {
		states = []State{}
	}
	return json.Marshal(states)
}

// UnmarshalJSON reads a list of state names; an unknown name is an error.
func (u *UniqueStates) UnmarshalJSON(b []byte) error {
	var states []State
	if err := json.Unmarshal(b, &states); err != nil {
		return fmt.Errorf("unique states: %w", err)
	}
	*u = 0
	for _, s := range states {
		if !s.Valid() {
			return fmt.Errorf("unique states: %q is not a job state", s)
		}
		*u |= UniqueStatesOf(s)
	}
	return nil
}

// Tx is a caller's transaction. Each backend documents the concrete types it
// accepts and returns ErrTxType for others. Nil means the backend's own pool.
type Tx any

// LeaseRef names one claim of one job: the job id and the fence the claim set.
type LeaseRef struct {
	ID    int64
	Fence int32
}

// AttemptError is one entry of a job's error history.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	Trace   string    `json:"trace,omitempty"`
}

// JobRow is a job as stored.
type JobRow struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	State       State           `json:"state"`
	Priority    int16           `json:"priority"`
	RunAt       time.Time       `json:"run_at"`
	Attempt     int16           `json:"attempt"`
	MaxAttempts int16           `json:"max_attempts"`
	Fence       int32           `json:"fence"`
	LeasedUntil *time.Time      `json:"leased_until,omitempty"` // set while running
	LeasedBy    string          `json:"leased_by,omitempty"`    // client id of the lease holder
	CreatedAt   time.Time       `json:"created_at"`
	AttemptedAt *time.Time      `json:"attempted_at,omitempty"`
	FinalizedAt *time.Time      `json:"finalized_at,omitempty"`
	Errors      []AttemptError  `json:"errors,omitempty"`
	Tags        []string        `json:"tags"`
	Metadata    json.RawMessage `json:"metadata"`
	// UniqueKey is the job's unique key (empty for a job inserted without
	// one), held while the job's state is in UniqueStates.
	UniqueKey    string       `json:"unique_key,omitempty"`
	UniqueStates UniqueStates `json:"unique_states,omitempty"`
	// Output is what the handler recorded (JobRecord), nil if nothing.
	Output json.RawMessage `json:"output,omitempty"`
	// FlowKey is the job's flow key (empty for none): the key its queue's
	// flow rules (per-key limits, rates, order, fair share) count it under.
	FlowKey string `json:"flow_key,omitempty"`
	// WaitKind is what a waiting job waits for (WaitDeps), empty otherwise.
	WaitKind string `json:"wait_kind,omitempty"`
	// DepsLeft counts a waiting task's dependencies not final yet (or, for
	// a batch callback, 1 until the batch is final).
	DepsLeft int `json:"deps_left,omitempty"`
	// HasDependents marks a job whose final state others wait for (a
	// workflow task with dependents, a batch member) until its finish has
	// settled them.
	HasDependents bool `json:"has_dependents,omitempty"`
	// WorkflowID and WorkflowTask name the workflow task the job is (0 and
	// empty for none); BatchID the batch it is a member of (0: none).
	WorkflowID   int64  `json:"workflow_id,omitempty"`
	WorkflowTask string `json:"workflow_task,omitempty"`
	BatchID      int64  `json:"batch_id,omitempty"`
}

// Lease returns the job's current lease reference.
func (r *JobRow) Lease() LeaseRef { return LeaseRef{ID: r.ID, Fence: r.Fence} }

// JobInsertParams is one job to insert. All fields are already validated.
type JobInsertParams struct {
	Queue       string
	Kind        string
	Args        json.RawMessage
	Priority    int16
	RunAt       *time.Time    // nil: now by the store's clock
	Delay       time.Duration // added to the store's clock when RunAt is nil
	MaxAttempts int16
	Tags        []string
	Metadata    json.RawMessage // nil or a JSON object
	// UniqueKey, when not empty, makes the insert unique: while another job
	// holds the key (its state is in its own UniqueStates), no row is
	// inserted and the result reports that job instead. The store enforces
	// it with a unique index, so concurrent inserts of one key from any
	// number of processes make one job. At most UniqueKeyMaxLen bytes of
	// printable ASCII; the client passes a hex digest.
	UniqueKey string
	// UniqueStates are the states in which this job will hold its key. It
	// includes UniqueStatesRequired.
	UniqueStates UniqueStates
	// FlowKey is the job's flow key, empty for none; at most FlowKeyMaxLen
	// bytes of printable UTF-8.
	FlowKey string
}

// UniqueKeyMaxLen is the longest unique key a backend stores.
const UniqueKeyMaxLen = 64

// JobInsertManyParams inserts jobs, in order.
type JobInsertManyParams struct {
	Tx   Tx // nil: the backend's own connection
	Jobs []*JobInsertParams
	// NoIDs tells the backend the caller does not need the new ids, so it may
	// use a faster bulk path (COPY in PostgreSQL) and leave IDs nil. A call
	// with unique jobs reports ids all the same.
	NoIDs bool
}

// JobInsertManyResult reports the ids of the inserted jobs, in input order
// (nil when NoIDs was set), and how many were inserted. For a unique job
// whose key was held, IDs has the holder's id and Duplicates is true at its
// index; Duplicates is nil when no job of the call was a duplicate. The
// unique keys of one call are distinct (the client folds repeats within a
// call); a backend may refuse a call that repeats one.
type JobInsertManyResult struct {
	IDs        []int64
	Duplicates []bool
	Count      int
}

// JobClaimParams claims up to Max pending, due jobs of Queue in order
// (priority, run_at, id), marking them running under a new fence.
type JobClaimParams struct {
	Queue string
	Max   int
	Lease time.Duration // lease length, added to the store's clock
	// ClaimID is recorded as the lease holder (JobRow.LeasedBy). The runtime
	// makes it unique per claim call ("<client id>#<n>"), so that the jobs of
	// a claim whose reply was lost can be released by JobReleaseClaim.
	ClaimID string
	// More, when set, may be called by a store whose claims of a queue
	// wait their turn (MariaDB's claim lock), once the turn has come and
	// before the claim reads the queue: it returns how many jobs the claim
	// may take beyond Max, the room its caller made while the claim
	// waited, which the caller counts as asked from then on. Once a call
	// has returned more than zero, later calls return the same number.
	More func() int
}

// JobReleaseClaimParams returns to the queue the jobs still running under
// ClaimID, with their attempt given back: for a claim that may have
// committed although its caller never received the jobs.
type JobReleaseClaimParams struct {
	ClaimID string
}

// Outcome is what to do with a running job.
type Outcome uint8

// Outcomes of a run.
const (
	OutcomeComplete Outcome = iota + 1 // finished: completed
	OutcomeRetry                       // failed: retryable after Delay (discarded at max attempts)
	OutcomeSnooze                      // put back for Delay without using the attempt
	OutcomeCancel                      // cancelled
	OutcomeDiscard                     // discarded now
	OutcomeRelease                     // returned unstarted: pending now, attempt given back
)

// JobFinish is the outcome of one claim.
type JobFinish struct {
	Lease   LeaseRef
	Outcome Outcome
	Delay   time.Duration // OutcomeRetry, OutcomeSnooze: added to the store's clock
	Error   *AttemptError // recorded in the error history when not nil
	// Durable is set when the run recorded durable steps: a store whose
	// records do not go with a job deleted at its completion deletes them
	// with it.
	Durable bool
	// Steps are step records of the run that produced this outcome, still
	// to be written under Lease, in the order recorded, after every
	// earlier record of the run committed. Only a store that declares
	// OutcomeStepWriter is given any: it writes them with the outcome,
	// fenced by it (only if the outcome applies: none for an outcome
	// rejected, nor for a job the outcome deletes), before or in the
	// outcome's transaction, and never after it.
	Steps []StepRecordParams
}

// JobFinishManyParams writes outcomes, each guarded by its lease.
type JobFinishManyParams struct {
	Tx Tx // nil: the backend's own connection
	// Finishes is the caller's until the call returns, and no longer: the
	// runtime's outcome writer reuses the slice for its next batch.
	Finishes []JobFinish
	// DeleteCompleted deletes completed jobs instead of keeping them.
	DeleteCompleted bool
}

// JobFinishManyResult lists the leases that no longer held their job; their
// outcomes were not written.
type JobFinishManyResult struct {
	Rejected []LeaseRef
	// Unwritten lists outcomes a store made of several databases (a
	// sharded backend) could not write because one of them failed, with
	// that failure in Err; the others were written or rejected. The caller
	// retries these later, without holding other outcomes behind them. A
	// store of one database fails with an error instead.
	Unwritten []LeaseRef
	Err       error
}

// Incomplete returns Err when some outcomes were not written, else nil.
func (r *JobFinishManyResult) Incomplete() error {
	if len(r.Unwritten) > 0 {
		return r.Err
	}
	return nil
}

// CountApplied counts the finishes of p that the store applied (their lease
// is neither in r.Rejected nor in r.Unwritten) and that match, for wrappers
// that count outcomes (metrics, benchmarks). match nil counts every applied
// finish.
func (r *JobFinishManyResult) CountApplied(p *JobFinishManyParams, match func(JobFinish) bool) int {
	var rejected map[LeaseRef]bool
	if len(r.Rejected)+len(r.Unwritten) > 0 {
		rejected = make(map[LeaseRef]bool, len(r.Rejected)+len(r.Unwritten))
		for _, l := range r.Rejected {
			rejected[l] = true
		}
		for _, l := range r.Unwritten {
			rejected[l] = true
		}
	}
	n := 0
	for _, f := range p.Finishes {
		if !rejected[f.Lease] && (match == nil || match(f)) {
			n++
		}
	}
	return n
}

// JobRecordParams writes what a running job's handler recorded, if Lease
// still holds the job: Output (when not nil) replaces the job's output, and
// Metadata (when not nil, a JSON object) replaces its metadata. Both are
// valid JSON, already size-checked.
type JobRecordParams struct {
	Lease    LeaseRef
	Output   json.RawMessage
	Metadata json.RawMessage
}

// JobHeartbeatManyParams extends the leases of running jobs to Lease past the
// store's now. A lease is never shortened: a client may have two beats out at
// once, and the one sent first may land last.
type JobHeartbeatManyParams struct {
	Leases []LeaseRef
	Lease  time.Duration
}

// JobHeartbeatManyResult lists the leases that no longer hold their job (lost
// to rescue, cancelled, or finished elsewhere).
type JobHeartbeatManyResult struct {
	Lost []LeaseRef
	// Unextended lists leases a store made of several databases could not
	// extend because one of them failed, with that failure in Err; the
	// others were extended (or are in Lost).
	Unextended []LeaseRef
	Err        error
}

// Incomplete returns Err when some leases were not extended, else nil.
func (r *JobHeartbeatManyResult) Incomplete() error {
	if len(r.Unextended) > 0 {
		return r.Err
	}
	return nil
}

// JobRescueParams returns running jobs whose lease ended before the store's
// now: pending again at once (the lease's wait served as backoff), or
// discarded when they have used their attempts.
type JobRescueParams struct {
	Max int // at most this many per call; 0: DefaultRescueMax
}

// JobRescueResult counts rescued jobs.
type JobRescueResult struct {
	Retried   int
	Discarded int
}

// JobCleanupParams deletes finished jobs older than the given ages (measured
// from finalization by the store's clock). A zero age keeps that state. A
// call that deletes fewer than Max jobs (the last of a round) also deletes
// the rate states (JobClaimFlow) whose time passed an hour ago: a past time
// means the same as no state.
type JobCleanupParams struct {
	CompletedAge time.Duration
	DiscardedAge time.Duration
	CancelledAge time.Duration
	Max          int // at most this many per call; 0: DefaultCleanupMax
}

// JobListParams filters a job listing. Zero values do not filter.
type JobListParams struct {
	// Tx lists through a caller's transaction, which sees its own
	// uncommitted inserts; nil lists through the backend's own connections.
	Tx      Tx
	Queue   string
	Kind    string
	States  []State
	AfterID int64 // paging: only ids greater than this
	Limit   int   // 0: DefaultListLimit
	// Newest lists in descending id order, newest first; BeforeID pages it.
	Newest bool
	// BeforeID, when not zero, keeps only ids smaller than it.
	BeforeID int64
	// CreatedAfter and CreatedBefore bound the jobs' insert time
	// (exclusive); zero means no bound.
	CreatedAfter  time.Time
	CreatedBefore time.Time
}

// JobDeleteParams deletes a job that is not running.
type JobDeleteParams struct{ ID int64 }

// JobThroughputParams asks how many jobs finished in each interval of a
// window that ends now, by the store's clock.
type JobThroughputParams struct {
	// Window is how far back to look; at most 7 days.
	Window time.Duration
	// Bucket is each interval's width, a whole number of seconds, at least
	// one; buckets start at multiples of it since the Unix epoch.
	Bucket time.Duration
	// Queue keeps one queue's jobs; empty keeps every queue's.
	Queue string
}

// ThroughputBucket counts the jobs that finished in one interval, by the
// state they finished in. Intervals where none finished are left out.
type ThroughputBucket struct {
	Start     time.Time `json:"start"`
	Completed int64     `json:"completed"`
	Discarded int64     `json:"discarded"`
	Cancelled int64     `json:"cancelled"`
}

// JobRetryParams makes a job pending again now, with a fresh set of attempts.
// Running jobs cannot be retried. A unique job whose key another job took
// meanwhile is refused with ErrUniqueConflict.
type JobRetryParams struct{ ID int64 }

// JobCancelParams cancels a pending or running job. A running job's lease
// holder learns of it at its next heartbeat; a Notifier also sends a Wake
// with CancelledID (a CancelWatcher reports the id) so that it can
// heartbeat at once.
type JobCancelParams struct{ ID int64 }

// BulkAction is what JobBulk does to each job it selects.
type BulkAction uint8

// Bulk actions and the states each applies to; jobs in other states are
// left alone, so running one twice changes nothing the second time.
const (
	// BulkRetry: retryable, scheduled and finished jobs become available
	// now with a fresh set of attempts, as JobRetry (waiting jobs wait on).
	BulkRetry BulkAction = iota + 1
	// BulkCancel: waiting, pending and running jobs are cancelled, as
	// JobCancel.
	BulkCancel
	// BulkDelete: jobs in any state but running and waiting are deleted.
	BulkDelete
)

// String names the action ("retry").
func (a BulkAction) String() string {
	switch a {
	case BulkRetry:
		return "retry"
	case BulkCancel:
		return "cancel"
	case BulkDelete:
		return "delete"
	}
	return fmt.Sprintf("BulkAction(%d)", uint8(a))
}

// Applies reports whether the action changes a job in state s.
func (a BulkAction) Applies(s State) bool {
	switch a {
	case BulkRetry:
		return s != StateAvailable && s != StateRunning && s != StateWaiting
	case BulkCancel:
		return s == StateWaiting || s == StateAvailable || s == StateScheduled || s == StateRetryable || s == StateRunning
	case BulkDelete:
		return s != StateRunning && s != StateWaiting
	}
	return false
}

// JobBulkParams applies Action to the jobs with ids above AfterID that
// match every filter given (zero values do not filter), taking the first
// Max of them in id order that the action applies to.
type JobBulkParams struct {
	Action        BulkAction
	Queue         string
	Kind          string
	States        []State
	CreatedAfter  time.Time // zero: no lower bound; exclusive
	CreatedBefore time.Time // zero: no upper bound; exclusive
	AfterID       int64
	Max           int
}

// JobBulkResult reports one batch. Changed jobs were changed by the batch;
// LastID is the highest id the batch took (0 when it took none): the next
// batch starts after it, and a batch that took fewer than Max jobs was the
// last. UniqueRetries (BulkRetry only) are unique jobs the batch took but
// did not retry, because retrying them takes back a unique key that another
// job may hold: the caller retries them one by one with JobRetry.
type JobBulkResult struct {
	Changed       int
	Taken         int
	LastID        int64
	UniqueRetries []int64
}

// QueueStats counts jobs of one queue by state.
type QueueStats struct {
	Queue  string
	Counts map[State]int64
}

// QueuePauseParams pauses (Paused) or resumes a queue.
type QueuePauseParams struct {
	Queue  string
	Paused bool
}

// Op names the operation, "pause" or "resume", for errors and logs.
func (p *QueuePauseParams) Op() string {
	if p.Paused {
		return "pause"
	}
	return "resume"
}

// PausedQueue is a paused queue and when it was paused (the store's clock).
type PausedQueue struct {
	Queue string
	Since time.Time
}

// PeriodicJob is a periodic job's definition as the leader of the store's
// clients recorded it, with what it fired. The store keeps one per Name and
// never deletes one: a definition that no leader declares any more keeps
// its last SeenAt.
type PeriodicJob struct {
	Name string
	// Schedule describes the schedule ("every 5m0s", a cron expression).
	Schedule string
	// Queue is the queue its jobs are inserted into.
	Queue string
	// Since is when a leader first recorded it, by that leader's clock: no
	// slot before it fires. Kept from the first record.
	Since time.Time
	// LastSlot is the latest slot fired (zero: none yet). It never moves
	// back.
	LastSlot time.Time
	// NextSlot is the next slot as of the last record (zero: none).
	NextSlot time.Time
	// StartedAt is when it last ran on start (zero: never), by the leader's
	// clock; the run's job is keyed by it.
	StartedAt time.Time
	// SeenAt is when a leader last recorded it, by the store's clock.
	SeenAt time.Time
}

// PeriodicRecordParams records the periodic jobs a leader declares. For
// each job, a new Name is stored as given (SeenAt aside); a known one takes
// Schedule, Queue and NextSlot, LastSlot when it is later than the stored
// one, and StartedAt when it is not zero and the stored one is zero or
// before StartAfter; Since is kept. Every job's SeenAt becomes the store's
// now.
type PeriodicRecordParams struct {
	Jobs       []PeriodicJob
	StartAfter time.Time
}

// LeaderElectParams tries to become, or stay, the leader of Name for TTL.
type LeaderElectParams struct {
	Name     string
	ClientID string
	TTL      time.Duration
}

// LeaderResignParams gives up leadership if held.
type LeaderResignParams struct {
	Name     string
	ClientID string
}

// SchemaVersion is a store's schema version beside the newest one known.
type SchemaVersion struct {
	Current int // 0: not migrated
	Latest  int
}

// Check returns nil when Current is Latest, and otherwise an error matching
// ErrSchemaNotMigrated (behind) or ErrSchemaTooNew (ahead).
func (v SchemaVersion) Check() error {
	switch {
	case v.Current < v.Latest:
		return fmt.Errorf("schema at version %d of %d: %w", v.Current, v.Latest, ErrSchemaNotMigrated)
	case v.Current > v.Latest:
		return fmt.Errorf("schema at version %d, this spool knows %d: %w", v.Current, v.Latest, ErrSchemaTooNew)
	}
	return nil
}

// Backend is a job store. Implementations are safe for concurrent use.
type Backend interface {
	Awaits // debounced inserts and the finished-job feed (await.go)
	// Name is the backend's short name ("postgres").
	Name() string
	// Migrate brings the store's schema to the newest version this backend
	// knows. Safe to call from many processes at once. It returns an error
	// matching ErrSchemaTooNew, and changes nothing, when the store is ahead.
	Migrate(ctx context.Context) error
	// SchemaVersion reports the store's schema version (0 when it has not
	// been migrated) and the newest version this backend knows.
	SchemaVersion(ctx context.Context) (SchemaVersion, error)

	// JobInsertMany inserts jobs, all or none. On a store that has not
	// been migrated (or is behind) it returns an error matching
	// ErrSchemaNotMigrated, as Client.Start does (see ExplainMissingObject).
	JobInsertMany(ctx context.Context, p *JobInsertManyParams) (*JobInsertManyResult, error)
	JobClaim(ctx context.Context, p *JobClaimParams) ([]*JobRow, error)
	// JobClaimFlow runs claim inside one transaction that holds the queue's
	// flow lock (FlowTx) and commits the jobs its takes claimed when claim
	// returns nil; when claim returns an error nothing is claimed and the
	// error is returned.
	JobClaimFlow(ctx context.Context, p *JobClaimFlowParams, claim func(FlowTx) error) error
	// JobReleaseClaim returns how many jobs it released.
	JobReleaseClaim(ctx context.Context, p *JobReleaseClaimParams) (int, error)
	JobFinishMany(ctx context.Context, p *JobFinishManyParams) (*JobFinishManyResult, error)
	JobHeartbeatMany(ctx context.Context, p *JobHeartbeatManyParams) (*JobHeartbeatManyResult, error)
	// JobRecord writes a running job's output and metadata; it reports
	// false, writing nothing, when the lease no longer holds the job.
	JobRecord(ctx context.Context, p *JobRecordParams) (bool, error)
	JobRescue(ctx context.Context, p *JobRescueParams) (*JobRescueResult, error)
	JobCleanup(ctx context.Context, p *JobCleanupParams) (int, error)

	// JobGet returns a job or ErrNotFound.
	JobGet(ctx context.Context, id int64) (*JobRow, error)
	JobList(ctx context.Context, p *JobListParams) ([]*JobRow, error)
	// JobRetry returns ErrNotFound, ErrInvalidState (running) or
	// ErrUniqueConflict.
	JobRetry(ctx context.Context, p *JobRetryParams) (*JobRow, error)
	// JobCancel returns ErrNotFound or ErrInvalidState (already finished).
	JobCancel(ctx context.Context, p *JobCancelParams) (*JobRow, error)
	// JobDelete deletes a job and returns it as it was; ErrNotFound, or
	// ErrInvalidState for a running or waiting job (cancel it first), or
	// one that other jobs wait for (cancel it, or its workflow).
	JobDelete(ctx context.Context, p *JobDeleteParams) (*JobRow, error)
	// JobThroughput counts finished jobs by interval (the dashboard's
	// chart); it reads the index of finished jobs by finish time.
	JobThroughput(ctx context.Context, p *JobThroughputParams) ([]ThroughputBucket, error)
	// JobBulk applies a bulk action to one batch of jobs, in one short
	// transaction. Cancelling running jobs wakes their holders as JobCancel
	// does.
	JobBulk(ctx context.Context, p *JobBulkParams) (*JobBulkResult, error)
	QueueStatsAll(ctx context.Context) ([]QueueStats, error)
	// QueuePause pauses or resumes a queue. While a queue is paused, JobClaim
	// takes none of its jobs, in every process: the setting is stored and
	// the claim checks it. Running jobs are not touched. Pausing a paused
	// queue (or resuming a running one) changes nothing and is no error; a
	// queue need not have jobs to be paused. Resuming wakes listeners of the
	// queue where the backend is a Notifier.
	QueuePause(ctx context.Context, p *QueuePauseParams) error
	// QueuePausedAll lists the paused queues, by name.
	QueuePausedAll(ctx context.Context) ([]PausedQueue, error)
	// QueueFlowUse reports the running and pending jobs of a queue's flow
	// keys and their rate state, busiest keys first.
	QueueFlowUse(ctx context.Context, p *QueueFlowUseParams) ([]FlowKeyUse, error)

	// PeriodicRecord records the periodic jobs a leader declares (see
	// PeriodicRecordParams) in one write per job, and returns them as
	// stored after the call, in the order given. Two leaders recording a
	// job at once store one Since and one StartedAt, which both get back.
	PeriodicRecord(ctx context.Context, p *PeriodicRecordParams) ([]PeriodicJob, error)
	// PeriodicList lists the recorded periodic jobs, by name.
	PeriodicList(ctx context.Context) ([]PeriodicJob, error)

	// LeaderElect reports whether ClientID leads Name after the call.
	LeaderElect(ctx context.Context, p *LeaderElectParams) (bool, error)
	LeaderResign(ctx context.Context, p *LeaderResignParams) error

	// StepStore keeps durable steps, waits and signals (steps.go).
	StepStore

	// Close releases resources the backend opened itself.
	Close() error

	WorkflowStore
}

// Wake is a push notification from the store: jobs became runnable in Queue
// (every queue when Queue is empty and CancelledID is zero: the store changed
// in ways it cannot attribute), or the job CancelledID (non-zero) was
// cancelled while it may be running.
type Wake struct {
	Queue       string
	CancelledID int64
	// Route, when not 0, marks a wake-up for Queue that reached every
	// listening process alike (a WakeRouter's): the same number in each,
	// from which the processes agree, without asking each other, on the
	// one that answers it.
	Route uint64
	// Hops counts the times a routed wake-up was passed on
	// (WakeRouter.PassOn).
	Hops int
	// Window, when not 0, is a second route number for a routed wake-up:
	// the same for every wake-up of Queue whose jobs came due in the same
	// short window of time, in every listener. Processes that all route by
	// it send a window's wake-ups to one of them, whose claims take the
	// window's jobs together (see internal/engine/route.go).
	Window uint64
	// Jobs, when not nil, lists every job of Queue this wake-up announces:
	// a process whose own claims already took them all need not claim for
	// it. Nil when the store does not know them (more may wait).
	Jobs []int64
	// Note is a note a process announced to every listener
	// (WakeRouter.Announce); the other fields are then unset.
	Note string
}

// DeadlockCounter is an optional capability: a backend that retries
// transactions the server aborted for a deadlock or a lock wait timeout
// (MySQL) says how many it retried since it was opened.
type DeadlockCounter interface {
	DeadlockRetries() uint64
}

// StallCrediter is an optional capability of a store that credits a stall
// of its writers (a process stopped while it holds the write lock, which no
// write can pass) to every running lease afterwards. A lease of such a
// store can outlast what its holder saw of it, so the holder does not end
// a handler when the lease runs out by its own clock; it waits for a
// heartbeat to say the lease is lost.
type StallCrediter interface {
	CreditsStalls() bool
}

// OutcomeStepWriter is an optional capability of a store whose
// JobFinishMany writes the step records an outcome carries
// (JobFinish.Steps), each only while its lease holds the job, as
// StepRecordMany would: the runtime then hands a run's last records to
// its outcome instead of a batch of their own. A name the job has
// recorded already is left as it is.
type OutcomeStepWriter interface {
	WritesOutcomeSteps() bool
}

// SettleWriters is an optional capability of a store whose outcomes of
// jobs with dependents (JobRow.HasDependents) may be written by several
// JobFinishMany calls at once, as by several processes: the runtime then
// writes them through SettleWriters() writers of their own, beside the
// one for other outcomes, so that a finish releasing a large fan-out (a
// long write) holds up no other outcome. 0 (or a store without it): every
// outcome goes through the one writer.
type SettleWriters interface {
	SettleWriters() int
}

// WakeRouter is an optional capability of a Notifier whose wake-ups reach
// every listening process of the store (PostgreSQL's NOTIFY). Each process
// announces which queues it works; a routable wake-up (Wake.Route) is then
// answered by one process of those working its queue, chosen alike by
// every process, instead of by all of them, of which all but one would
// claim nothing. Notes and passed-on wake-ups are hints, like every
// wake-up: a lost one delays work by at most a poll.
type WakeRouter interface {
	// RoutesWakes reports whether the engine should route wake-ups (a
	// store may be configured not to: every process then answers every
	// wake-up).
	RoutesWakes() bool
	// Announce delivers note to every listener, this process's included,
	// as a Wake with Note set.
	Announce(ctx context.Context, note string) error
	// PassOn sends a routable wake-up for queue to every listener, with
	// Hops set to hops: the process it was routed to took a full claim
	// (more jobs may wait) or had no room to claim.
	PassOn(ctx context.Context, queue string, hops int) error
}

// RouteOf is a Wake.Route for the wake-up that key and n name: FNV-1a
// over key with n mixed in, never 0. It has no per-process seed, so every
// listening process computes the same route for the same wake-up.
func RouteOf(key string, n uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= n
	h *= 1099511628211
	return h | 1
}

// Notifier is an optional capability: push wake-ups when jobs become runnable
// and when running jobs are cancelled.
type Notifier interface {
	// Listen blocks, calling onWake for every notification, until ctx ends or
	// the connection fails; the error says why it stopped. It calls ready once
	// the subscription is in place: no notification after ready is missed.
	// Notifications are hints: a missed one delays work by at most a poll or
	// a heartbeat, and never changes an outcome. An error matching
	// ErrNoWakeUps means no later attempt can do better.
	Listen(ctx context.Context, ready func(), onWake func(Wake)) error
}

// WakeDemand is an optional capability of a Notifier some of whose
// wake-ups cost the store work whether or not a worker waits for them
// (PostgreSQL relays inserts from SQL by polling while they come). The
// engine registers a function reporting whether any of its queues has an
// idle worker, which would start a job inserted now only if a wake-up
// brought it. While no registered function reports one, the store may
// deliver those wake-ups later, within a bound it documents: a queue whose
// workers are all busy starts no job before one of them finishes, and
// keeps a wake-up that came meanwhile until its next claim, so a late one
// delays a job only if a worker fell idle before it came. A Listen with no
// function registered counts as one with no worker idle.
type WakeDemand interface {
	// AddWakeDemand registers waiting, which must be cheap and safe to
	// call from any goroutine, until remove is called.
	AddWakeDemand(waiting func() bool) (remove func())
}

// AddWakeDemandTo registers waiting with store when it is a WakeDemand, and
// returns the function that removes it (one that does nothing otherwise).
// A wrapper that passes a store's wake-ups on passes on through it what its
// client says of its idle workers.
func AddWakeDemandTo(store any, waiting func() bool) (remove func()) {
	if wd, ok := store.(WakeDemand); ok {
		return wd.AddWakeDemand(waiting)
	}
	return func() {}
}

// Registrations holds the values registered with a store until each one's
// remove function is called (the functions of WakeDemand, the queue sets
// of WakeQueues). The zero value is ready; it is safe for concurrent use.
type Registrations[T any] struct {
	mu sync.Mutex
	vs []*T // pointers: a registration's identity
}

// Add registers v until remove is called.
func (r *Registrations[T]) Add(v T) (remove func()) {
	p := &v
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vs = append(r.vs, p)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.vs = slices.DeleteFunc(r.vs, func(q *T) bool { return q == p })
	}
}

// Range calls f with each registered value, in the order of registration,
// until f returns false. f must not register or remove values.
func (r *Registrations[T]) Range(f func(T) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.vs {
		if !f(*v) {
			return
		}
	}
}

// WakeDemands holds the functions a WakeDemand store was given: a store's
// AddWakeDemand can be its Add.
type WakeDemands struct{ Registrations[func() bool] }

// Waiting reports whether a registered function reports an idle worker
// (false with none registered).
func (d *WakeDemands) Waiting() bool {
	waiting := false
	d.Range(func(f func() bool) bool {
		waiting = f()
		return !waiting
	})
	return waiting
}

// WakeQueues is an optional capability of a Notifier that reads the new
// jobs for a group of listening processes in one of them: the processes
// that work the same queues (MySQL's looker). The engine registers the
// queues its client works before it listens; a store reads new jobs for
// each set of queues registered with it, in one process of those that
// registered the same set. A Listen with no set registered counts as one
// working every queue.
type WakeQueues interface {
	// AddWakeQueues registers queues (in any order) until remove is
	// called.
	AddWakeQueues(queues []string) (remove func())
}

// AddWakeQueuesTo registers queues with store when it is a WakeQueues, and
// returns the function that removes them (one that does nothing
// otherwise). A wrapper that passes a store's wake-ups on passes on
// through it the queues its client works.
func AddWakeQueuesTo(store any, queues []string) (remove func()) {
	if wq, ok := store.(WakeQueues); ok {
		return wq.AddWakeQueues(queues)
	}
	return func() {}
}

// CancelWatcher is an optional capability of a store that is not a
// Notifier: deliver cancellations of running jobs, made by any process,
// promptly (within a second), so that the lease holder stops the handler
// without waiting for its next heartbeat.
type CancelWatcher interface {
	// WatchCancels blocks, calling onCancel with the id of every running
	// job cancelled after ready was called, until ctx ends or the store
	// fails; the error says why it stopped. A job may be reported more than
	// once; a missed one is found at the holder's next heartbeat.
	WatchCancels(ctx context.Context, ready func(), onCancel func(id int64)) error
}
