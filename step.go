package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Errors of durable steps and waits (docs/durable.md).
var (
	// ErrStepName is matched by the error of a step or signal name that
	// is empty, longer than StepNameMaxLen bytes, not UTF-8, or in the
	// "spool:" namespace that Sleep and AwaitSignal record under.
	ErrStepName = errors.New("invalid step or signal name")
	// ErrStepReused is returned by Step and StepTx when the name was used
	// already in this run of the job: a job's steps are matched by name, so
	// two steps of one name would share one record.
	ErrStepReused = errors.New("step name used twice in one run of the job")
	// ErrStepDecode is matched when a recorded result does not decode into
	// the step's type (the code's type changed since it was recorded).
	ErrStepDecode = errors.New("recorded step result does not decode")
)

// StepNameMaxLen is the longest step or signal name, in bytes.
const StepNameMaxLen = backend.StepNameMaxLen

// StepRecord is one recorded step of a job.
type StepRecord = backend.StepRow

// SignalRecord is one signal sent to a job.
type SignalRecord = backend.SignalRow

// JobDurable is what a job recorded of its steps, signals and waits.
type JobDurable = backend.JobDurable

// internalPrefix names the records Sleep and AwaitSignal keep among a
// job's steps; user steps cannot take it.
const internalPrefix = "spool:"

// Step runs fn once per job, durably: its result is recorded as the step
// name of the job (as JSON) under the job's lease as soon as fn returns, in
// a write of its own. A later attempt of the job (after a retry, a crash,
// a wait) gets the recorded result back without calling fn. An error from
// fn records nothing, so the step runs again at the next attempt.
//
// Steps are matched by name, not by position: code that adds, removes or
// reorders steps between attempts does not strand a job; a name used twice
// in one run fails with ErrStepReused. The result must survive a JSON round
// trip (a later attempt gets the decoded form). Step fails with
// ErrLeaseLost, having run fn, when the lease no longer held the job at the
// record: a newer attempt owns the job and fn's result is not kept (fn runs
// at least once; make its effect idempotent, or use StepTx for database
// effects). ctx must be the job's context.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	return step(ctx, nil, name, fn)
}

// StepTx is Step whose record is written in the caller's transaction tx
// (of the type CompleteTx takes): fn does its database work in tx, and
// the step's effects and its record commit or roll back together, so they
// happen exactly once per job. The caller commits; a transaction rolled
// back leaves no step, and the name stays used for the rest of this run
// (return an error to retry the job).
func StepTx[T any](ctx context.Context, tx any, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if tx == nil {
		return zero, fmt.Errorf("step %q in tx: %w: nil transaction", name, ErrTxType)
	}
	return step(ctx, tx, name, fn)
}

func step[T any](ctx context.Context, tx any, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if err := checkStepName(name, "step"); err != nil {
		return zero, err
	}
	st, err := durableRun(ctx, "step "+name)
	if err != nil {
		return zero, err
	}
	if !st.use(name) {
		return zero, fmt.Errorf("step %q of job %d: %w", name, st.run.ID(), ErrStepReused)
	}
	rec, found, err := st.lookup(ctx, name)
	if err != nil {
		return zero, err
	}
	if found {
		var v T
		if err := json.Unmarshal(rec.Result, &v); err != nil {
			return zero, fmt.Errorf("step %q of job %d: %w into %T: %v", name, st.run.ID(), ErrStepDecode, v, err)
		}
		return v, nil
	}
	// A run whose lease ended (a cancel, a rescue after a stall) may
	// have been replaced by a newer attempt that records this step: do
	// not start the function then.
	if err := context.Cause(ctx); err != nil {
		return zero, fmt.Errorf("step %q of job %d: %w", name, st.run.ID(), err)
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("step %q of job %d: %w", name, st.run.ID(), invalid("step", nil, "result does not encode to JSON: %v", err))
	}
	if len(out) > MaxOutputBytes {
		return zero, fmt.Errorf("step %q of job %d: %w", name, st.run.ID(), invalid("step", nil, "result of %d bytes, over the limit of %d", len(out), MaxOutputBytes))
	}
	if why := checkStorableJSON(out); why != "" {
		return zero, fmt.Errorf("step %q of job %d: %w", name, st.run.ID(), invalid("step", nil, "result must not %s", why))
	}
	if err := st.record(ctx, tx, name, out); err != nil {
		return zero, err
	}
	return v, nil
}

// checkStepName checks a user's step or signal name.
func checkStepName(name, what string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name: %w: empty", what, ErrStepName)
	case len(name) > StepNameMaxLen:
		return fmt.Errorf("%s name %.40q…: %w: %d bytes, over %d", what, name, ErrStepName, len(name), StepNameMaxLen)
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return fmt.Errorf("%s name %q: %w: not UTF-8 text", what, name, ErrStepName)
	case what == "step" && strings.HasPrefix(name, internalPrefix):
		return fmt.Errorf("%s name %q: %w: names starting %q are Spool's own", what, name, ErrStepName, internalPrefix)
	}
	return nil
}

// runSteps is one run's view of its job's durable records: read once, at
// the first step (a run that calls none reads nothing), and the names the
// run used.
type runSteps struct {
	run *engine.Run
	c   *Client

	mu      sync.Mutex
	loaded  bool
	steps   map[string]backend.StepRow
	signals map[string]backend.SignalRow
	used    map[string]bool
	sleeps  int
}

// durableRun returns the durable record of the run whose context ctx is.
func durableRun(ctx context.Context, op string) (*runSteps, error) {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrNotInJob)
	}
	c, ok := ClientFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrNotInJob)
	}
	return run.Durable(func() any { return &runSteps{run: run, c: c, used: map[string]bool{}} }).(*runSteps), nil
}

// use marks name used in this run; false if it was already.
func (s *runSteps) use(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[name] {
		return false
	}
	s.used[name] = true
	return true
}

// nextSleep names the run's next Sleep: its ordinal among the run's sleeps.
func (s *runSteps) nextSleep() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sleeps++
	return fmt.Sprintf("%ssleep:%d", internalPrefix, s.sleeps)
}

// load reads the job's records unless read; fresh reads them again.
func (s *runSteps) load(ctx context.Context, fresh bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded && !fresh {
		return nil
	}
	d, err := s.run.Backend().JobDurable(ctx, s.run.ID())
	if err != nil {
		return fmt.Errorf("read steps of job %d: %w", s.run.ID(), err)
	}
	s.steps = make(map[string]backend.StepRow, len(d.Steps))
	for _, r := range d.Steps {
		s.steps[r.Name] = r
	}
	s.signals = make(map[string]backend.SignalRow, len(d.Signals))
	for _, r := range d.Signals {
		s.signals[r.Name] = r
	}
	s.loaded = true
	return nil
}

// lookup returns the recorded step name, if any.
func (s *runSteps) lookup(ctx context.Context, name string) (backend.StepRow, bool, error) {
	if err := s.load(ctx, false); err != nil {
		return backend.StepRow{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.steps[name]
	return r, ok, nil
}

// signal returns the signal name sent to the job, if any; fresh reads the
// store again.
func (s *runSteps) signal(ctx context.Context, name string, fresh bool) (backend.SignalRow, bool, error) {
	if err := s.load(ctx, fresh); err != nil {
		return backend.SignalRow{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.signals[name]
	return r, ok, nil
}

// record writes a step under the run's lease, in tx when not nil.
func (s *runSteps) record(ctx context.Context, tx any, name string, result json.RawMessage) error {
	p := backend.StepRecordParams{Tx: tx, Lease: s.run.Lease(), Name: name, Result: result}
	var (
		ok  bool
		err error
	)
	if tx != nil {
		ok, err = s.run.Backend().StepRecord(ctx, &p)
	} else {
		ok, err = s.c.steps.record(ctx, s.run.Backend(), p)
	}
	if err != nil {
		return fmt.Errorf("record step %q of job %d: %w", name, s.run.ID(), err)
	}
	if !ok {
		return fmt.Errorf("record step %q of job %d: %w", name, s.run.ID(), ErrLeaseLost)
	}
	if tx == nil {
		s.mu.Lock()
		s.steps[name] = backend.StepRow{JobID: s.run.ID(), Name: name, Result: result, Fence: s.run.Lease().Fence}
		s.mu.Unlock()
	}
	return nil
}

// stepBatcher group-commits step records: a record made while another
// batch is being written waits for it and goes, with every other record
// made meanwhile, in the next batch, one transaction for all
// (StepRecordMany). A record made while none is being written goes at
// once, alone: batching adds no wait, and under load a transaction's cost
// is shared by the records of many jobs.
type stepBatcher struct {
	mu       sync.Mutex
	pending  []*stepRequest
	flushing bool
}

type stepRequest struct {
	p    backend.StepRecordParams
	res  backend.StepRecordResult
	err  error
	done chan struct{}
}

// stepBatchMax bounds the records of one transaction.
const stepBatchMax = 500

// stepBatchTimeout bounds one batch's write: it is made for many jobs, so
// no one job's context ends it.
const stepBatchTimeout = 30 * time.Second

// record writes p in a batch and returns what StepRecord would.
func (b *stepBatcher) record(ctx context.Context, be backend.Backend, p backend.StepRecordParams) (bool, error) {
	req := &stepRequest{p: p, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, req)
	if b.flushing {
		b.mu.Unlock()
		select {
		case <-req.done:
			return req.res.Recorded, req.resErr()
		case <-ctx.Done():
			// The batch may still write it: a later attempt finds it.
			return false, fmt.Errorf("%w: the run ended while its step's record waited for its batch (%w)", backend.ErrOutcomeUnknown, context.Cause(ctx))
		}
	}
	b.flushing = true
	for len(b.pending) > 0 {
		n := min(len(b.pending), stepBatchMax)
		batch := slices.Clone(b.pending[:n])
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		params := &backend.StepRecordManyParams{Steps: make([]backend.StepRecordParams, len(batch))}
		for i, r := range batch {
			params.Steps[i] = r.p
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepBatchTimeout)
		res, err := be.StepRecordMany(wctx, params)
		cancel()
		for i, r := range batch {
			if err != nil {
				r.err = err
			} else {
				r.res = res[i]
			}
			close(r.done)
		}
		b.mu.Lock()
	}
	b.flushing = false
	b.mu.Unlock()
	<-req.done
	return req.res.Recorded, req.resErr()
}

func (r *stepRequest) resErr() error {
	if r.err != nil {
		return r.err
	}
	return r.res.Err
}
