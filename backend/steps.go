package backend

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrStepRecorded means a step of that name is already recorded for the job:
// the record was not written, and the recorded result stands.
var ErrStepRecorded = errors.New("a step of this name is already recorded for the job")

// FirstFence is the fence of a job's first claim on every store: a job is
// inserted with fence 0 and every claim raises it (conformance checks
// both), so a lease of fence FirstFence is the only claim the job ever
// had, and no step of the job can have been recorded before it.
const FirstFence int32 = 1

// StepNameMaxLen and SignalNameMaxLen bound the names a store keeps.
const (
	StepNameMaxLen   = 200
	SignalNameMaxLen = 200
)

// StepRow is one recorded step of a job: the result its function returned
// (JSON), recorded under the claim Fence, at At by the store's clock.
type StepRow struct {
	JobID  int64           `json:"job_id"`
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result"`
	Fence  int32           `json:"fence"`
	At     time.Time       `json:"at"`
}

// SignalRow is one signal sent to a job: the first of its name, kept.
type SignalRow struct {
	JobID   int64           `json:"job_id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	At      time.Time       `json:"at"`
}

// StepRecordParams records a step's result, if Lease still holds the job
// (running under that fence), in Tx when not nil: the record commits or
// rolls back with the caller's transaction. Name is at most StepNameMaxLen
// bytes of UTF-8; Result is valid JSON, already size-checked.
type StepRecordParams struct {
	Tx     Tx
	Lease  LeaseRef
	Name   string
	Result json.RawMessage
}

// StepRecordManyParams records steps of several jobs in one transaction
// of the store's own, each as StepRecord would alone.
type StepRecordManyParams struct {
	Steps []StepRecordParams // Tx must be nil in each
}

// StepRecordResult is what one record of StepRecordMany did: Recorded, or
// refused because its lease no longer held its job (both false, nil), or
// Err matching ErrStepRecorded.
type StepRecordResult struct {
	Recorded bool
	Err      error
}

// JobWaitParams ends a running job's attempt as a snooze does (the attempt
// is given back, the job is scheduled and keeps its queue place by run_at)
// while Lease holds it: due Delay after the store's now, or at once when
// Signal is not empty and a signal of that name was already sent. A
// non-empty Signal is recorded as the job's wait_signal, so that a signal
// of that name sent later makes the job due at once; an empty one clears
// it. The check of the signal and the park are serialised with JobSignal
// on the same job, so a signal is never missed between them.
type JobWaitParams struct {
	Lease  LeaseRef
	Delay  time.Duration
	Signal string
}

// JobWaitResult reports a wait: Applied is false, nothing written, when the
// lease no longer held the job; Signalled is true when the awaited signal
// was already there, so the job was made due at once; Queue is the job's
// queue.
type JobWaitResult struct {
	Applied   bool
	Signalled bool
	Queue     string
}

// JobSignalParams sends the signal Name to job JobID with Payload (valid
// JSON, already size-checked), in Tx when not nil.
type JobSignalParams struct {
	Tx      Tx
	JobID   int64
	Name    string
	Payload json.RawMessage
}

// JobSignalResult reports a signal: First is false when a signal of that
// name had been sent to the job before (the first one stands, this payload
// is dropped); Woke is true when the job was waiting for it and was made
// due at once; Queue is the job's queue.
type JobSignalResult struct {
	First bool
	Woke  bool
	Queue string
}

// JobDurable is what a job recorded of its durable steps and waits.
type JobDurable struct {
	// Steps in the order recorded.
	Steps []StepRow `json:"steps"`
	// Signals sent to the job, by name.
	Signals []SignalRow `json:"signals"`
	// WaitSignal names the signal the job's last wait was for (empty:
	// none); while the job is scheduled and no such signal is in Signals,
	// it waits for it until its run_at.
	WaitSignal string `json:"wait_signal,omitempty"`
}

// StepStore is the part of a store that keeps durable steps, waits and
// signals (docs/durable.md). A job's steps and signals live beside it, and
// go when it is deleted.
type StepStore interface {
	// StepRecord records a step under its lease. It reports false, writing
	// nothing, when the lease no longer holds the job, and returns an error
	// matching ErrStepRecorded when the job has a step of that name.
	StepRecord(ctx context.Context, p *StepRecordParams) (bool, error)
	// StepRecordMany records steps of several jobs in one transaction (a
	// group commit of records made at once by different jobs), with one
	// result per step in order; an error fails them all, none written.
	StepRecordMany(ctx context.Context, p *StepRecordManyParams) ([]StepRecordResult, error)
	// JobWait parks a running job (see JobWaitParams).
	JobWait(ctx context.Context, p *JobWaitParams) (*JobWaitResult, error)
	// JobSignal records a signal and wakes the job if it waits for it. It
	// returns ErrNotFound when no job has the id.
	JobSignal(ctx context.Context, p *JobSignalParams) (*JobSignalResult, error)
	// JobDurable returns a job's steps, signals and wait (empty for a job
	// with none, and for an unknown id).
	JobDurable(ctx context.Context, id int64) (*JobDurable, error)
}
