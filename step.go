package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
// name of the job (as JSON) under the job's lease. The record is written
// behind: Step returns once it is queued, the client writes its runs'
// records in batches, in the order queued, and the run's outcome, its
// waits and its StepTx wait for them; on a store that writes records with
// outcomes (PostgreSQL, SQLite), the records still queued when the
// handler returns are written with its outcome instead (docs/durable.md,
// "Records written behind"). A later attempt of the job (after a retry, a crash, a wait)
// gets the recorded result back without calling fn. An error from fn
// records nothing, so the step runs again at the next attempt.
//
// Steps are matched by name, not by position: code that adds, removes or
// reorders steps between attempts does not strand a job; a name used twice
// in one run fails with ErrStepReused. The result must survive a JSON round
// trip (a later attempt gets the decoded form). When a record of the run
// failed, or the lease no longer held the job when it was written (a newer
// attempt owns the job), the run's next Step fails with that error
// (ErrLeaseLost) without calling its fn. fn runs at least once: a process
// killed before its record committed runs it again, and the steps after
// it whose records were still queued; make its effect idempotent, or use
// StepTx for database effects. ctx must be the job's context.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	return step(ctx, nil, name, fn)
}

// StepTx is Step whose record is written in the caller's transaction tx
// (of the type CompleteTx takes), after the run's earlier records were
// written: fn does its database work in tx, and the step's effects and its
// record commit or roll back together, so they happen exactly once per
// job. The caller commits; a transaction rolled back leaves no step, and
// the name stays used for the rest of this run (return an error to retry
// the job).
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
	st, err := durableRun(ctx, "step", name)
	if err != nil {
		return zero, err
	}
	if err := st.waiting("step", name); err != nil {
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
	// A run whose earlier record failed (its lease lost, the store
	// unreachable), or whose lease ended (a cancel, a rescue after a
	// stall), may have been replaced by a newer attempt that records this
	// step: do not start the function then.
	if err := st.settled(); err != nil {
		return zero, err
	}
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

// runSteps is one run's view of its job's durable records, read once, at
// the first step, and the names the run used. A run that calls no step
// reads nothing, and neither does the job's first claim (its lease's fence
// is backend.FirstFence) before it needs its signals: no attempt before it
// can have recorded a step.
type runSteps struct {
	run *engine.Run
	c   *Client

	mu         sync.Mutex
	loaded     bool // steps and signals read from the store
	stepsKnown bool // steps known: loaded, or none (the first claim)
	steps      map[string]backend.StepRow
	signals    map[string]backend.SignalRow
	used       usedNames
	sleeps     int
	// pending are the run's records written behind, in the order queued,
	// until settled finds them written; failed is the first one's error.
	pending []*stepRequest
	failed  error
	// broken is set by the batcher when one of the run's records failed:
	// its later records are not written.
	broken atomic.Bool
	// wait is the park the run asked for, written when its handler
	// returns (Finish).
	wait *pendingWait
}

// durableRun returns the durable record of the run whose context ctx is,
// for the operation what (of name, if not empty), which errors name.
func durableRun(ctx context.Context, what, name string) (*runSteps, error) {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", opName(what, name), ErrNotInJob)
	}
	if d, ok := run.Made(); ok {
		return d.(*runSteps), nil
	}
	c, ok := ClientFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", opName(what, name), ErrNotInJob)
	}
	return run.Durable(func() any { return &runSteps{run: run, c: c} }).(*runSteps), nil
}

// opName names an operation in errors: what, and its name if not empty.
// Built only for an error, not at every step.
func opName(what, name string) string {
	if name == "" {
		return what
	}
	return what + " " + name
}

// use marks name used in this run; false if it was already.
func (s *runSteps) use(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used.add(name)
}

// usedNames are the names a run used: a few in a slice, more in a map.
type usedNames struct {
	few  []string
	many map[string]struct{}
}

// usedFew is how many names usedNames keeps in its slice.
const usedFew = 16

// add adds name; false if it was there.
func (u *usedNames) add(name string) bool {
	if u.many != nil {
		if _, ok := u.many[name]; ok {
			return false
		}
		u.many[name] = struct{}{}
		return true
	}
	if slices.Contains(u.few, name) {
		return false
	}
	if len(u.few) < usedFew {
		if u.few == nil {
			u.few = make([]string, 0, 8)
		}
		u.few = append(u.few, name)
		return true
	}
	u.many = make(map[string]struct{}, 2*usedFew)
	for _, n := range u.few {
		u.many[n] = struct{}{}
	}
	u.few = nil
	u.many[name] = struct{}{}
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
	s.mu.Unlock()
	// What the store holds of this run's steps must include those it
	// wrote behind.
	err := s.settle(ctx)
	s.mu.Lock()
	if err != nil {
		return err
	}
	return s.readLocked(ctx)
}

// loadSteps makes the job's steps known: none at its first claim, else
// read with the rest of its records unless read.
func (s *runSteps) loadSteps(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stepsKnown {
		return nil
	}
	if s.run.Lease().Fence == backend.FirstFence {
		s.steps, s.stepsKnown = map[string]backend.StepRow{}, true
		return nil
	}
	return s.readLocked(ctx)
}

// readLocked reads the job's steps and signals; s.mu is held. The
// steps this run records are not kept beside them: a run looks up only
// names it has not used yet (use), which it cannot have recorded.
func (s *runSteps) readLocked(ctx context.Context) error {
	d, err := s.run.Backend().JobDurable(ctx, s.run.ID())
	if err != nil {
		return fmt.Errorf("read steps of job %d: %w", s.run.ID(), err)
	}
	steps := make(map[string]backend.StepRow, len(d.Steps))
	for _, r := range d.Steps {
		steps[r.Name] = r
	}
	s.steps = steps
	s.signals = make(map[string]backend.SignalRow, len(d.Signals))
	for _, r := range d.Signals {
		s.signals[r.Name] = r
	}
	s.loaded, s.stepsKnown = true, true
	return nil
}

// lookup returns the recorded step name, if any.
func (s *runSteps) lookup(ctx context.Context, name string) (backend.StepRow, bool, error) {
	if err := s.loadSteps(ctx); err != nil {
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

// record writes a step under the run's lease. In tx (not nil) it writes
// at once, after the run's earlier records committed. Otherwise the
// record is written behind: queued for the client's next batch, and
// record returns; the run's next record in a transaction, its next wait,
// a fresh read of its records and its outcome wait for it (settle), and
// its next step fails if it failed.
func (s *runSteps) record(ctx context.Context, tx any, name string, result json.RawMessage) error {
	if err := s.settled(); err != nil {
		return err
	}
	if tx != nil {
		if err := s.settle(ctx); err != nil {
			return err
		}
		ok, err := s.run.Backend().StepRecord(ctx, &backend.StepRecordParams{Tx: tx, Lease: s.run.Lease(), Name: name, Result: result})
		return recordError(name, s.run.ID(), ok, err)
	}
	req := s.c.steps.enqueue(s.run.Backend(), backend.StepRecordParams{Lease: s.run.Lease(), Name: name, Result: result}, s)
	s.mu.Lock()
	if s.pending == nil {
		s.pending = make([]*stepRequest, 0, 8)
	}
	s.pending = append(s.pending, req)
	s.mu.Unlock()
	return nil
}

// recordError is the error of a step's record that returned ok, err.
func recordError(name string, id int64, ok bool, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("record step %q of job %d: %w", name, id, err)
	case !ok:
		return fmt.Errorf("record step %q of job %d: %w", name, id, ErrLeaseLost)
	}
	return nil
}

// settled returns the error of the run's first record that failed, among
// those whose batch has been written; it does not wait.
func (s *runSteps) settled() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 && s.failed == nil {
		if !s.pending[0].complete.Load() {
			return nil
		}
		s.failed = s.pending[0].err()
		s.pending = s.pending[1:]
	}
	return s.failed
}

// settleWaiting, when set (by tests, before any client starts), is called
// each time settle starts waiting for a record in flight.
var settleWaiting func()

// settle waits until every record the run queued has been written, and
// returns the first one's error; the run's end (ctx) stops the wait, not
// the writes.
func (s *runSteps) settle(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.failed != nil || len(s.pending) == 0 {
			err := s.failed
			s.mu.Unlock()
			return err
		}
		req := s.pending[0]
		s.mu.Unlock()
		if settleWaiting != nil {
			settleWaiting()
		}
		select {
		case <-req.doneChan():
		case <-ctx.Done():
			// The batch may still write it: a later attempt finds it.
			return fmt.Errorf("%w: the run ended while its step's record waited for its batch (%w)", backend.ErrOutcomeUnknown, context.Cause(ctx))
		}
		if err := s.settled(); err != nil {
			return err
		}
	}
}

// Settled implements engine.Settler: the engine hands in the run's
// outcome only after its step records were written, so that an outcome
// never commits before them (a retry's next attempt finds every step the
// run recorded). Batches are written one after the other, in the order
// queued, so the run's last record written means all were. A record that
// failed does not change the outcome: its step runs again at the next
// attempt, if any.
func (s *runSteps) Settled() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	return s.pending[len(s.pending)-1].doneChan()
}

// errWithOutcome is the result of a record handed to its run's outcome
// (HandOver): it is written with the outcome, if the outcome applies.
var errWithOutcome = errors.New("the step's record was handed to the run's outcome")

// HandOver implements engine.StepHandover: the run's records that no
// batch has taken yet are taken out of the batcher's queue, to be written
// with the run's outcome, in its transaction, fenced by it (a store that
// declares backend.OutcomeStepWriter), instead of by a batch of their own
// and a wait for its commit: a run of short steps usually ends with its
// last records still queued (BENCHMARKS.md, "A run's last step records
// ride with its outcome"). The run's records a batch has taken are written
// first: inFlight is closed once they are, and take then returns the
// records handed over, or none when one of the earlier ones failed, so
// the records a run leaves are still the first of its steps, in order.
func (s *runSteps) HandOver() (inFlight <-chan struct{}, take func() []backend.StepRecordParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil, nil
	}
	b := &s.c.steps
	b.mu.Lock()
	// Batches take requests in the order queued, so the run's batched
	// requests come before its queued ones.
	first := len(s.pending)
	for i, r := range s.pending {
		if !r.batched {
			first = i
			break
		}
	}
	for _, r := range s.pending[first:] {
		r.handed = true
	}
	b.mu.Unlock()
	handed := s.pending[first:]
	if first > 0 {
		if last := s.pending[first-1]; !last.complete.Load() {
			inFlight = last.doneChan()
		}
	}
	if len(handed) == 0 {
		return inFlight, nil
	}
	return inFlight, func() []backend.StepRecordParams {
		var steps []backend.StepRecordParams
		if !s.broken.Load() {
			steps = make([]backend.StepRecordParams, len(handed))
			for i, r := range handed {
				steps[i] = r.p
			}
		}
		for _, r := range handed {
			r.fail = errWithOutcome
			r.finish()
		}
		return steps
	}
}

// stepBatcher group-commits the step records its client's runs queue: one
// batch at a time, each in one transaction (StepRecordMany) with every
// record queued while the previous one was written, in the order queued.
// A run's records are therefore written in its order, and once one of
// them fails, the run's later ones are not written: the records a run
// leaves are always the first of its steps, in order.
type stepBatcher struct {
	mu       sync.Mutex
	pending  []*stepRequest
	flushing bool
}

type stepRequest struct {
	p    backend.StepRecordParams
	run  *runSteps
	ok   bool
	fail error
	// complete is set once ok and fail are (finish); done, made only
	// for a caller that waits (doneChan), is closed then. Most records
	// go with their run's outcome and are never waited for.
	complete atomic.Bool
	mu       sync.Mutex
	done     chan struct{}
	// batched is set when a batch takes the request, handed when its run
	// hands it to its outcome instead (HandOver); both under the
	// batcher's mu, so a request goes one way only.
	batched, handed bool
}

// finish marks the request complete, ok and fail set, and wakes its
// waiters.
func (r *stepRequest) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.complete.Store(true)
	if r.done != nil {
		close(r.done)
	}
}

// doneChan returns a channel closed once the request is complete.
func (r *stepRequest) doneChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = make(chan struct{})
		if r.complete.Load() {
			close(r.done)
		}
	}
	return r.done
}

// err is the request's outcome as an error, once complete.
func (r *stepRequest) err() error { return recordError(r.p.Name, r.p.Lease.ID, r.ok, r.fail) }

// errEarlierRecord fails a record whose run's earlier record failed.
var errEarlierRecord = errors.New("an earlier step's record of this run failed")

// stepBatchMax bounds the records of one transaction.
const stepBatchMax = 500

// stepBatchTimeout bounds one batch's write: it is made for many jobs, so
// no one job's context ends it.
const stepBatchTimeout = 30 * time.Second

// enqueue queues p, a record of run, for the next batch written to be,
// starting a writer unless one is running, and returns it at once.
func (b *stepBatcher) enqueue(be backend.Backend, p backend.StepRecordParams, run *runSteps) *stepRequest {
	req := &stepRequest{p: p, run: run}
	b.mu.Lock()
	b.pending = append(b.pending, req)
	start := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if start {
		go b.flush(be)
	}
	return req
}

// flush writes batches until none is pending.
func (b *stepBatcher) flush(be backend.Backend) {
	b.mu.Lock()
	for len(b.pending) > 0 {
		n := min(len(b.pending), stepBatchMax)
		batch := make([]*stepRequest, 0, n)
		for _, r := range b.pending[:n] {
			if !r.handed {
				r.batched = true
				batch = append(batch, r)
			}
		}
		clear(b.pending[:n])
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		if len(batch) > 0 {
			b.write(be, batch)
		}
		b.mu.Lock()
	}
	b.flushing = false
	b.mu.Unlock()
}

// writeStepBatch writes a batch of records, trying again with backoff
// after a connection fault (backend.ErrNotWritten, ErrOutcomeUnknown) for
// up to stepBatchTimeout, as outcomes are: a batch's transaction either
// commits whole or not at all, and a record written twice under one fence
// is kept once. A record left unwritten would let the run's outcome commit
// without it. It reports whether the write was tried more than once.
func writeStepBatch(be backend.Backend, params *backend.StepRecordManyParams) (res []backend.StepRecordResult, retried bool, err error) {
	deadline := time.Now().Add(stepBatchTimeout)
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		res, err = be.StepRecordMany(ctx, params)
		cancel()
		transient := errors.Is(err, backend.ErrNotWritten) || errors.Is(err, backend.ErrOutcomeUnknown)
		if !transient || time.Now().Add(backoff).After(deadline) {
			return res, attempt > 1, err
		}
		time.Sleep(backoff/2 + rand.N(backoff/2))
		backoff = min(2*backoff, time.Second)
	}
}

// write writes one batch and completes its requests. The batches are
// written one after the other, so a run whose record failed in one is
// known broken before the next is built.
func (b *stepBatcher) write(be backend.Backend, batch []*stepRequest) {
	live := make([]*stepRequest, 0, len(batch))
	params := &backend.StepRecordManyParams{Steps: make([]backend.StepRecordParams, 0, len(batch))}
	for _, r := range batch {
		if r.run.broken.Load() {
			r.fail = errEarlierRecord
			r.finish()
			continue
		}
		live = append(live, r)
		params.Steps = append(params.Steps, r.p)
	}
	if len(live) == 0 {
		return
	}
	res, retried, err := writeStepBatch(be, params)
	if err == nil && len(res) != len(live) {
		err = fmt.Errorf("record steps: %d results for %d records", len(res), len(live))
	}
	for i, r := range live {
		if err != nil {
			r.fail = err
		} else {
			r.ok, r.fail = res[i].Recorded, res[i].Err
			if retried && errors.Is(r.fail, backend.ErrStepRecorded) {
				// An earlier try committed though its reply was lost:
				// the name is recorded under this run's lease, and only
				// this run records it.
				r.ok, r.fail = true, nil
			}
		}
		if r.fail != nil || !r.ok {
			r.run.broken.Store(true)
		}
		r.finish()
	}
}
