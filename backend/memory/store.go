package memory

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/wakehub"
)

// store is the jobs and leaders of one memory database. One mutex guards
// it: every operation is short and none waits on anything while holding it.
type store struct {
	mu      sync.Mutex
	nextID  int64
	jobs    map[int64]*backend.JobRow
	leaders map[string]leader
	paused  map[string]time.Time // paused queues and since when
	// periodic is the recorded periodic jobs, by name.
	periodic map[string]backend.PeriodicJob
	// unique maps a unique key to the last job inserted with it; the job
	// holds the key while it exists (in jobs, or in an open transaction's
	// inserts) and its state is in its UniqueStates.
	unique   map[string]*backend.JobRow
	inOpenTx map[*backend.JobRow]bool
	// debounce maps a debounced key to its current job (await.go).
	debounce map[string]*backend.JobRow
	// rates is the stored rate state (GCRA arrival times) by queue and
	// flow key.
	rates map[[2]string]time.Time
	// durable is each job's steps, waits and signals (steps.go).
	durable map[int64]*durable
	hub     *wakehub.Hub
	// Workflows and batches (workflow.go): edges by parent, the
	// workflows' and batches' records.
	children  map[int64][]backend.WorkflowEdge
	parents   map[int64][]backend.WorkflowEdge
	workflows map[int64]*workflowRec
	batches   map[int64]*backend.Batch
	nextWF    int64
	nextBatch int64
}

type leader struct {
	id      string
	expires time.Time
}

func newStore() *store {
	return &store{
		jobs:     map[int64]*backend.JobRow{},
		leaders:  map[string]leader{},
		paused:   map[string]time.Time{},
		periodic: map[string]backend.PeriodicJob{},
		unique:   map[string]*backend.JobRow{},
		rates:    map[[2]string]time.Time{},
		inOpenTx: map[*backend.JobRow]bool{},
		hub:      wakehub.New(),

		children:  map[int64][]backend.WorkflowEdge{},
		parents:   map[int64][]backend.WorkflowEdge{},
		workflows: map[int64]*workflowRec{},
		batches:   map[int64]*backend.Batch{},
	}
}

// now is the store's clock, in UTC and to the microsecond as the SQL
// backends store times.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func pending(s backend.State) bool {
	return s == backend.StateAvailable || s == backend.StateScheduled || s == backend.StateRetryable
}

func finished(s backend.State) bool {
	return s.IsFinal()
}

// copyRow returns a copy of j that shares nothing mutable with it.
func copyRow(j *backend.JobRow) *backend.JobRow {
	c := *j
	c.Args = slices.Clone(j.Args)
	c.Metadata = slices.Clone(j.Metadata)
	c.Tags = slices.Clone(j.Tags)
	c.Errors = slices.Clone(j.Errors)
	c.Output = slices.Clone(j.Output)
	if j.LeasedUntil != nil {
		t := *j.LeasedUntil
		c.LeasedUntil = &t
	}
	if j.AttemptedAt != nil {
		t := *j.AttemptedAt
		c.AttemptedAt = &t
	}
	if j.FinalizedAt != nil {
		t := *j.FinalizedAt
		c.FinalizedAt = &t
	}
	return &c
}

func timePtr(t time.Time) *time.Time { return &t }

// newRow builds the row of an insert at time t. The id is taken by the caller.
func newRow(id int64, p *backend.JobInsertParams, t time.Time) *backend.JobRow {
	runAt := t.Add(p.Delay)
	if p.RunAt != nil {
		runAt = p.RunAt.UTC().Truncate(time.Microsecond)
	}
	state := backend.StateAvailable
	if runAt.After(t) {
		state = backend.StateScheduled
	}
	tags := slices.Clone(p.Tags)
	if tags == nil {
		tags = []string{}
	}
	meta := slices.Clone(p.Metadata)
	if len(meta) == 0 {
		meta = json.RawMessage(`{}`)
	}
	return &backend.JobRow{
		ID: id, Queue: p.Queue, Kind: p.Kind, Args: slices.Clone(p.Args), State: state,
		Priority: p.Priority, RunAt: runAt, MaxAttempts: p.MaxAttempts, CreatedAt: t,
		Tags: tags, Metadata: meta, UniqueKey: p.UniqueKey, UniqueStates: p.UniqueStates,
		FlowKey: p.FlowKey,
	}
}

// holder returns the job that holds key, if any; s.mu is held.
func (s *store) holder(key string) (*backend.JobRow, bool) {
	j, ok := s.unique[key]
	if !ok {
		return nil, false
	}
	if (s.jobs[j.ID] == j || s.inOpenTx[j]) && j.UniqueStates.Has(j.State) {
		return j, true
	}
	delete(s.unique, key)
	return nil, false
}

// held reports whether l is the running lease of its job; s.mu is held.
func (s *store) held(l backend.LeaseRef) (*backend.JobRow, bool) {
	j, ok := s.jobs[l.ID]
	return j, ok && j.Fence == l.Fence && j.State == backend.StateRunning
}

// finish applies one outcome to a job whose lease holds, at time t, and
// returns the wake-up it causes, if any; s.mu is held.
func (s *store) finish(j *backend.JobRow, f backend.JobFinish, deleteCompleted bool, t time.Time) (backend.Wake, bool) {
	if f.Error != nil {
		e := *f.Error
		e.At = t
		j.Errors = append(j.Errors, e)
	}
	j.LeasedUntil, j.LeasedBy = nil, ""
	switch f.Outcome {
	case backend.OutcomeComplete:
		if deleteCompleted && !j.HasDependents { // dependents read its output
			s.deleteJob(j.ID)
			return backend.Wake{}, false
		}
		j.State, j.FinalizedAt = backend.StateCompleted, timePtr(t)
	case backend.OutcomeRetry:
		if j.Attempt >= j.MaxAttempts {
			j.State, j.FinalizedAt = backend.StateDiscarded, timePtr(t)
			break
		}
		j.State, j.RunAt = backend.StateRetryable, t.Add(f.Delay)
	case backend.OutcomeSnooze:
		j.Attempt--
		j.RunAt = t.Add(f.Delay)
		j.State = backend.StateAvailable
		if f.Delay > 0 {
			j.State = backend.StateScheduled
		}
	case backend.OutcomeCancel:
		j.State, j.FinalizedAt = backend.StateCancelled, timePtr(t)
	case backend.OutcomeDiscard:
		j.State, j.FinalizedAt = backend.StateDiscarded, timePtr(t)
	default: // OutcomeRelease
		j.Attempt--
		j.State = backend.StateAvailable
	}
	if pending(j.State) && !j.RunAt.After(t) {
		return backend.Wake{Queue: j.Queue}, true
	}
	return backend.Wake{}, false
}

// runnable returns one wake-up per queue of rows that are due at t.
func runnable(rows []*backend.JobRow, t time.Time) []backend.Wake {
	var out []backend.Wake
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Queue] && pending(r.State) && !r.RunAt.After(t) {
			seen[r.Queue] = true
			out = append(out, backend.Wake{Queue: r.Queue})
		}
	}
	return out
}
