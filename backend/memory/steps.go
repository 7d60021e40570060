package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// durable is what one job recorded of its steps, waits and signals.
type durable struct {
	steps      []backend.StepRow
	signals    []backend.SignalRow
	waitSignal string
}

// durableOf returns id's record, made on first use; s.mu is held.
func (s *store) durableOf(id int64) *durable {
	if s.durable == nil {
		s.durable = map[int64]*durable{}
	}
	d := s.durable[id]
	if d == nil {
		d = &durable{}
		s.durable[id] = d
	}
	return d
}

// deleteJob deletes a job with its steps and signals; s.mu is held.
func (s *store) deleteJob(id int64) {
	delete(s.jobs, id)
	delete(s.durable, id)
}

func (d *durable) step(name string) bool {
	return slices.ContainsFunc(d.steps, func(r backend.StepRow) bool { return r.Name == name })
}

func (d *durable) signal(name string) bool {
	return slices.ContainsFunc(d.signals, func(r backend.SignalRow) bool { return r.Name == name })
}

// StepRecord implements backend.StepStore. In a *Tx the lease is checked
// now and the step recorded at the commit, which fails if the lease moved
// on meanwhile.
func (b *Backend) StepRecord(ctx context.Context, p *backend.StepRecordParams) (bool, error) {
	if err := b.check(); err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held(p.Lease); !ok {
		return false, nil
	}
	if d := s.durable[p.Lease.ID]; d != nil && d.step(p.Name) {
		return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, backend.ErrStepRecorded)
	}
	row := backend.StepRow{JobID: p.Lease.ID, Name: p.Name, Result: slices.Clone(p.Result), Fence: p.Lease.Fence, At: now()}
	if tx != nil {
		if err := tx.addStep(p.Lease, row); err != nil {
			return false, fmt.Errorf("record step %q of job %d: %w", p.Name, p.Lease.ID, err)
		}
		return true, nil
	}
	d := s.durableOf(p.Lease.ID)
	d.steps = append(d.steps, row)
	return true, nil
}

// applyStep records a step of a committing transaction; s.mu is held and
// the lease was checked.
func (s *store) applyStep(row backend.StepRow) error {
	d := s.durableOf(row.JobID)
	if d.step(row.Name) {
		return fmt.Errorf("commit: step %q of job %d: %w", row.Name, row.JobID, backend.ErrStepRecorded)
	}
	d.steps = append(d.steps, row)
	return nil
}

// JobWait implements backend.StepStore.
func (b *Backend) JobWait(ctx context.Context, p *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("park job %d: %w", p.Lease.ID, err)
	}
	s := b.s
	t := now()
	s.mu.Lock()
	j, ok := s.held(p.Lease)
	if !ok {
		s.mu.Unlock()
		return &backend.JobWaitResult{}, nil
	}
	res := &backend.JobWaitResult{Applied: true, Queue: j.Queue}
	delay := max(p.Delay, time.Microsecond) // a wait is never available at once by its delay alone
	if p.Signal != "" && s.durable[j.ID] != nil && s.durable[j.ID].signal(p.Signal) {
		res.Signalled, delay = true, 0
	}
	w, wake := s.finish(j, backend.JobFinish{Lease: p.Lease, Outcome: backend.OutcomeSnooze, Delay: delay}, false, t)
	if p.Signal != "" || s.durable[j.ID] != nil {
		s.durableOf(j.ID).waitSignal = p.Signal
	}
	s.mu.Unlock()
	if wake {
		s.hub.Publish(w)
	}
	return res, nil
}

// JobSignal implements backend.StepStore. A signal in a *Tx is not
// supported: the memory store records it at once.
func (b *Backend) JobSignal(ctx context.Context, p *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	if _, err := txOf(b, p.Tx); err != nil {
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, err)
	}
	s := b.s
	t := now()
	s.mu.Lock()
	j, ok := s.jobs[p.JobID]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("signal job %d: %w", p.JobID, backend.ErrNotFound)
	}
	res := &backend.JobSignalResult{Queue: j.Queue}
	d := s.durableOf(j.ID)
	if !d.signal(p.Name) {
		res.First = true
		d.signals = append(d.signals, backend.SignalRow{JobID: j.ID, Name: p.Name, Payload: slices.Clone(p.Payload), At: t})
		if j.State == backend.StateScheduled && d.waitSignal == p.Name {
			j.RunAt, j.State = t, backend.StateAvailable
			res.Woke = true
		}
	}
	s.mu.Unlock()
	if res.Woke {
		s.hub.Publish(backend.Wake{Queue: j.Queue})
	}
	return res, nil
}

// JobDurable implements backend.StepStore.
func (b *Backend) JobDurable(ctx context.Context, id int64) (*backend.JobDurable, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("read steps of job %d: %w", id, err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &backend.JobDurable{Steps: []backend.StepRow{}, Signals: []backend.SignalRow{}}
	d := s.durable[id]
	if d == nil {
		return out, nil
	}
	for _, r := range d.steps {
		r.Result = slices.Clone(r.Result)
		out.Steps = append(out.Steps, r)
	}
	for _, r := range d.signals {
		r.Payload = slices.Clone(r.Payload)
		out.Signals = append(out.Signals, r)
	}
	slices.SortFunc(out.Signals, func(a, b backend.SignalRow) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	out.WaitSignal = d.waitSignal
	return out, nil
}

// StepRecordMany implements backend.StepStore, one record at a time.
func (b *Backend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	out := make([]backend.StepRecordResult, len(p.Steps))
	for i := range p.Steps {
		ok, err := b.StepRecord(ctx, &p.Steps[i])
		if err != nil && !errors.Is(err, backend.ErrStepRecorded) {
			return nil, err
		}
		out[i] = backend.StepRecordResult{Recorded: ok, Err: err}
	}
	return out, nil
}
