package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Errors of durable waits (docs/durable.md).
var (
	// ErrWaiting is matched by the error Sleep and AwaitSignal return when
	// they park the job: once the handler returns, its attempt ends (given
	// back, as a snooze gives it back) and the job runs again when its wait
	// is over. The handler returns the error as it is; what it returns
	// after a park is ignored, and a step or wait it calls after one fails
	// with an error matching ErrWaiting.
	ErrWaiting = errors.New("job is waiting")
	// ErrUntimedWait is returned by AwaitSignal given a timeout that is not
	// positive: a wait without a timeout is not supported yet.
	ErrUntimedWait = errors.New("awaiting a signal needs a timeout > 0")
	// ErrSignalTimeout is matched by the *SignalTimeoutError AwaitSignal
	// returns when the timeout passed with no signal.
	ErrSignalTimeout = errors.New("signal wait timed out")
)

// MaxSignalBytes limits a signal's encoded payload.
const MaxSignalBytes = MaxOutputBytes

// SignalTimeoutError is returned by AwaitSignal when its timeout passed
// before a signal of its name was sent; it matches ErrSignalTimeout. The
// handler decides: return it (the job is retried as for any error) or go
// on without the signal.
type SignalTimeoutError struct {
	JobID   int64
	Signal  string
	Timeout time.Duration
}

// Error implements error.
func (e *SignalTimeoutError) Error() string {
	return fmt.Sprintf("job %d: no signal %q within %s", e.JobID, e.Signal, e.Timeout)
}

// Unwrap lets errors.Is match ErrSignalTimeout.
func (e *SignalTimeoutError) Unwrap() error { return ErrSignalTimeout }

// waitError is what Sleep and AwaitSignal return once they asked for a
// park. It unwraps to ErrWaiting and to a snooze outcome, so the worker's
// result is a snooze whatever middleware wraps it; the park is written
// when the handler returns (Finish), which makes that outcome a fenced
// no-op.
type waitError struct {
	msg string
	oe  *engine.OutcomeError
}

func (e *waitError) Error() string   { return e.msg }
func (e *waitError) Unwrap() []error { return []error{ErrWaiting, e.oe} }

// waitRecord is what a wait records among the job's steps: how long it
// waits from the record's time (the store's clock).
type waitRecord struct {
	For time.Duration `json:"for_ns"`
}

// Sleep parks the job for d without holding a worker: it ends the attempt
// (given back, as a snooze does), the job becomes scheduled at now + d by
// the store's clock, and its next run replays its recorded steps (Step
// returns their results without running them) to this Sleep, which then
// returns nil. The handler must return the error Sleep returns (matching
// ErrWaiting) at once: the park is written when the handler returns, so
// the job's next attempt never starts beside this one. A sleep is
// recorded among the job's steps as "spool:sleep:N", N its ordinal among
// the run's calls of Sleep, so sleeps are matched by their order (steps
// are matched by name); d ≤ 0 returns nil.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	st, err := durableRun(ctx, "sleep", "")
	if err != nil {
		return err
	}
	if err := st.waiting("sleep", ""); err != nil {
		return err
	}
	name := st.nextSleep()
	st.use(name)
	rec, found, err := st.lookup(ctx, name)
	if err != nil {
		return err
	}
	if found {
		left, err := waitLeft(rec)
		if err != nil {
			return fmt.Errorf("sleep of job %d: %w", st.run.ID(), err)
		}
		if left <= 0 {
			return nil
		}
		return st.park(left, "", fmt.Sprintf("job %d sleeps %s more", st.run.ID(), left.Round(time.Millisecond)))
	}
	if err := st.recordWait(ctx, name, d); err != nil {
		return err
	}
	return st.park(d, "", fmt.Sprintf("job %d sleeps %s", st.run.ID(), d))
}

// AwaitSignal returns the payload of the signal name sent to the job (by
// Client.Signal, from any process, or by SQL), waiting up to timeout for it
// without holding a worker: when no signal is there yet, it parks the job
// (the attempt given back) until the signal arrives or the timeout passes,
// and returns an error matching ErrWaiting, which the handler returns at
// once (the park is written when it returns). The job's next run replays its recorded steps to this call, which
// then returns the payload, or a *SignalTimeoutError once the timeout has
// passed. A signal sent before the wait is kept; the first signal of a name
// wins. timeout must be positive (ErrUntimedWait). A name is awaited once
// per run.
func AwaitSignal(ctx context.Context, name string, timeout time.Duration) (json.RawMessage, error) {
	if err := checkStepName(name, "signal"); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("await signal %q: %w (got %s)", name, ErrUntimedWait, timeout)
	}
	st, err := durableRun(ctx, "await signal", name)
	if err != nil {
		return nil, err
	}
	if err := st.waiting("await signal", name); err != nil {
		return nil, err
	}
	waitName := internalPrefix + "await:" + name
	if !st.use(waitName) {
		return nil, fmt.Errorf("await signal %q of job %d: %w", name, st.run.ID(), ErrStepReused)
	}
	if sig, ok, err := st.signal(ctx, name, false); err != nil || ok {
		return sig.Payload, err
	}
	rec, found, err := st.lookup(ctx, waitName)
	if err != nil {
		return nil, err
	}
	// The records were read at the run's first step; a signal may have
	// come since, so ask again before deciding.
	if sig, ok, err := st.signal(ctx, name, true); err != nil || ok {
		return sig.Payload, err
	}
	if found {
		left, err := waitLeft(rec)
		if err != nil {
			return nil, fmt.Errorf("await signal %q of job %d: %w", name, st.run.ID(), err)
		}
		if left <= 0 {
			return nil, &SignalTimeoutError{JobID: st.run.ID(), Signal: name, Timeout: timeout}
		}
		return nil, st.park(left, name, fmt.Sprintf("job %d awaits signal %q, %s more", st.run.ID(), name, left.Round(time.Millisecond)))
	}
	if err := st.recordWait(ctx, waitName, timeout); err != nil {
		return nil, err
	}
	return nil, st.park(timeout, name, fmt.Sprintf("job %d awaits signal %q for %s", st.run.ID(), name, timeout))
}

// waitLeft is how long a recorded wait has left by this process's clock.
func waitLeft(rec backend.StepRow) (time.Duration, error) {
	var w waitRecord
	if err := json.Unmarshal(rec.Result, &w); err != nil {
		return 0, fmt.Errorf("%w: wait record %q: %v", ErrStepDecode, rec.Name, err)
	}
	return time.Until(rec.At.Add(w.For)), nil
}

// recordWait records a wait of d as the step name.
func (s *runSteps) recordWait(ctx context.Context, name string, d time.Duration) error {
	b, err := json.Marshal(waitRecord{For: d})
	if err != nil {
		return err
	}
	return s.record(ctx, nil, name, b)
}

// pendingWait is the wait a run asked for, written once its handler
// returns (Finish).
type pendingWait struct {
	d      time.Duration
	signal string // empty: a sleep
	msg    string
}

// park asks for the run's attempt to end by a wait of d for signal (empty:
// none), and returns the error the handler returns. The park itself is
// written by Finish, once the handler has returned.
func (s *runSteps) park(d time.Duration, signal, msg string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitingLocked("wait", ""); err != nil {
		return err
	}
	s.wait = &pendingWait{d: d, signal: signal, msg: msg}
	return &waitError{msg: msg, oe: &engine.OutcomeError{Outcome: backend.OutcomeSnooze, Delay: d}}
}

// waiting returns an error matching ErrWaiting once the run has asked for
// a wait: it does nothing more (no step, no other wait).
func (s *runSteps) waiting(what, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitingLocked(what, name)
}

// waitingLocked is waiting with s.mu held.
func (s *runSteps) waitingLocked(what, name string) error {
	if s.wait == nil {
		return nil
	}
	return fmt.Errorf("%s of job %d: %w: the run already waits (%s); return that wait's error", opName(what, name), s.run.ID(), ErrWaiting, s.wait.msg)
}

// Finish implements engine.Finisher: the wait the run asked for is written
// once its handler has returned, after the run's records. Written sooner,
// while the handler's code still ran, the wait would hand the job back
// while its attempt was still live: a signal already sent makes it due at
// once, and another worker could start it beside the returning handler.
// What the handler returned after asking for the wait is ignored; an error
// writing the wait is the run's error.
func (s *runSteps) Finish(ctx context.Context, handlerErr error) error {
	s.mu.Lock()
	w := s.wait
	s.mu.Unlock()
	if w == nil {
		return handlerErr
	}
	lease := s.run.Lease()
	// The park ends the attempt, after which no record of it is written:
	// the run's records written behind go first.
	if err := s.settle(ctx); err != nil {
		return err
	}
	res, err := s.run.Backend().JobWait(ctx, &backend.JobWaitParams{Lease: lease, Delay: w.d, Signal: w.signal})
	if err != nil {
		return fmt.Errorf("park job %d: %w", lease.ID, err)
	}
	if !res.Applied {
		return fmt.Errorf("park job %d: %w", lease.ID, ErrLeaseLost)
	}
	due := time.Now().Add(w.d)
	msg := w.msg
	if res.Signalled {
		due = time.Now()
		msg += " (the signal had come: due at once)"
	}
	s.c.engine.Parked(lease, res.Queue, due)
	return &waitError{msg: msg, oe: &engine.OutcomeError{Outcome: backend.OutcomeSnooze, Delay: w.d}}
}

// SignalResult reports a signal sent by Client.Signal.
type SignalResult struct {
	// First is false when a signal of that name had been sent to the job
	// before: the first one stands and this payload was dropped.
	First bool
	// Woke is true when the job was waiting for the signal and was made
	// due at once.
	Woke bool
}

// Signal sends the signal name with payload (encoded as JSON, at most
// MaxSignalBytes; nil is JSON null) to the job jobID, from any process. It
// is durable: a signal sent before the job awaits it is kept, and the first
// signal of a name wins. A job waiting for it (AwaitSignal) is made due at
// once, in the same transaction. It returns ErrNotFound for an unknown job.
func (c *Client) Signal(ctx context.Context, jobID int64, name string, payload any) (SignalResult, error) {
	return c.SignalTx(ctx, nil, jobID, name, payload)
}

// SignalTx is Signal in the caller's transaction tx (of the type InsertTx
// takes; nil: the store's own): the signal is kept, and wakes its job, at
// the commit.
func (c *Client) SignalTx(ctx context.Context, tx any, jobID int64, name string, payload any) (SignalResult, error) {
	if err := checkStepName(name, "signal"); err != nil {
		return SignalResult{}, fmt.Errorf("signal job %d: %w", jobID, err)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return SignalResult{}, fmt.Errorf("signal job %d: %w", jobID, invalid("payload", nil, "payload does not encode to JSON: %v", err))
	}
	if len(b) > MaxSignalBytes {
		return SignalResult{}, fmt.Errorf("signal job %d: %w", jobID, invalid("payload", nil, "payload of %d bytes, over the limit of %d", len(b), MaxSignalBytes))
	}
	if why := checkStorableJSON(b); why != "" {
		return SignalResult{}, fmt.Errorf("signal job %d: %w", jobID, invalid("payload", nil, "payload must not %s", why))
	}
	res, err := c.backend.JobSignal(ctx, &backend.JobSignalParams{Tx: tx, JobID: jobID, Name: name, Payload: b})
	if err != nil {
		return SignalResult{}, err // the backend names the operation and the job
	}
	if res.Woke && tx == nil {
		c.engine.Wake(res.Queue)
	}
	return SignalResult{First: res.First, Woke: res.Woke}, nil
}

// JobDurable returns what the job recorded of its durable steps, the
// signals sent to it and the signal its last wait was for (empty records
// for an unknown id).
func (c *Client) JobDurable(ctx context.Context, jobID int64) (*JobDurable, error) {
	return c.backend.JobDurable(ctx, jobID)
}
