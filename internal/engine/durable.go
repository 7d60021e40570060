package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

// Durable returns the value the caller keeps for this run (the root
// package's record of the run's durable steps), made by mk on the first
// call. Every call of one run returns the same value.
func (r *Run) Durable(mk func() any) any {
	r.durableOnce.Do(func() {
		r.durable = mk()
		r.hasDurable.Store(true)
	})
	return r.durable
}

// Made returns the value Durable made for this run, if it made one.
func (r *Run) Made() (any, bool) {
	if !r.hasDurable.Load() {
		return nil, false
	}
	return r.durable, true
}

// Settler is implemented by a run's durable state (the value Durable
// keeps) whose writes may still be in flight when the handler returns:
// Settled returns a channel closed once they are all written (nil: none
// in flight). The executor hands the run's outcome in only then, so the
// outcome is never written before them; the run's slot is free meanwhile.
type Settler interface{ Settled() <-chan struct{} }

// settled is the run's Settled, nil if it has no durable writes.
func (r *Run) settled() <-chan struct{} {
	if !r.hasDurable.Load() {
		return nil
	}
	if s, ok := r.durable.(Settler); ok {
		return s.Settled()
	}
	return nil
}

// StepHandover is implemented by a run's durable state whose records
// queued behind may be handed to the run's outcome (a store that declares
// backend.OutcomeStepWriter writes them with it). HandOver, called once
// the handler has returned and Finish has run, takes the run's records
// that no batch has taken yet out of the queue, and returns a channel
// closed once the run's records already taken by a batch are written
// (nil: none in flight) and take, to call once that channel is closed:
// it returns the records to write with the outcome (none when an earlier
// one failed, so that the records a run leaves stay the first of its
// steps).
type StepHandover interface {
	HandOver() (inFlight <-chan struct{}, take func() []backend.StepRecordParams)
}

// handOver is the run's HandOver when the store writes records with
// outcomes (stepsWithOutcome) and the run's durable state hands them
// over; else its settled channel and no take.
func (r *Run) handOver(stepsWithOutcome bool) (<-chan struct{}, func() []backend.StepRecordParams) {
	if !r.hasDurable.Load() {
		return nil, nil
	}
	if h, ok := r.durable.(StepHandover); ok && stepsWithOutcome {
		return h.HandOver()
	}
	return r.settled(), nil
}

// Finisher is implemented by a run's durable state that has a write to
// make once the handler has returned: a wait the handler asked for
// (Sleep, AwaitSignal) is written then, not while the handler's code still
// runs, since the wait hands the job back and its next attempt may start
// at once (a signal already sent). Finish gets the handler's error and
// returns the error the outcome is worked out from.
type Finisher interface {
	Finish(ctx context.Context, handlerErr error) error
}

// finish calls the run's Finisher, if any, turning a panic into an error.
func (r *Run) finish(ctx context.Context, handlerErr error) (err error) {
	if !r.hasDurable.Load() {
		return handlerErr
	}
	f, ok := r.durable.(Finisher)
	if !ok {
		return handlerErr
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("finish the run of job %d: panic: %v", r.lease.ID, v)
		}
	}()
	return f.Finish(ctx, handlerErr)
}

// UsedDurable reports whether the run has used durable records (Durable).
func (r *Run) UsedDurable() bool { return r.hasDurable.Load() }

// Lease is the running job's lease.
func (r *Run) Lease() backend.LeaseRef { return r.lease }

// Backend is the store the run's job lives in.
func (r *Run) Backend() backend.Backend { return r.be }

// Parked tells the engine that the run of lease ended its attempt by a
// committed wait (backend.StepStore.JobWait, written by Finish): the
// outcome the handler returned is expected to be rejected, and the
// producer of queue looks again at due, when the job is due.
func (e *Engine) Parked(lease backend.LeaseRef, queue string, due time.Time) {
	e.running.markCompletedInTx(lease)
	e.wakeAt(queue, due)
}
