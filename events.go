package spool

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// EventKind names what happened to a job.
type EventKind string

// Event kinds. The outcomes of a handler's run are reported once the store
// applied them, by the client that ran the job; EventJobRetried by the
// client whose JobRetry or JobsRetry made the job run again.
const (
	// EventJobCompleted: the handler succeeded.
	EventJobCompleted EventKind = "job_completed"
	// EventJobFailed: the handler failed and the job will run again after
	// NextRunIn.
	EventJobFailed EventKind = "job_failed"
	// EventJobDiscarded: the job failed for good (its last attempt failed,
	// the handler discarded it, or its args do not decode).
	EventJobDiscarded EventKind = "job_discarded"
	// EventJobCancelled: the handler cancelled the job.
	EventJobCancelled EventKind = "job_cancelled"
	// EventJobSnoozed: the handler put the job back for NextRunIn without
	// using an attempt.
	EventJobSnoozed EventKind = "job_snoozed"
	// EventJobRetried: an operator's JobRetry made a job available again
	// (JobsRetry reports a count instead of an event per job). It is sent
	// once the retry has committed, so the outcome of the job's next run,
	// in a worker quick enough, may be reported before it.
	EventJobRetried EventKind = "job_retried"
)

// Event is one thing that happened to a job.
type Event struct {
	Kind        EventKind
	JobID       int64
	JobKind     string
	Queue       string
	Attempt     int
	MaxAttempts int
	// Duration is how long the handler ran (zero for EventJobRetried).
	Duration time.Duration
	// Error is the attempt's error, for failed, discarded and cancelled
	// jobs that have one.
	Error string
	// NextRunIn is the delay before the next run, for failed and snoozed
	// jobs (added to the database's clock).
	NextRunIn time.Duration
	// At is when the client learned of it.
	At time.Time
}

// eventBuffer is each subscription's channel capacity.
const eventBuffer = 1024

// subscriptions fans events out to subscribers.
type subscriptions struct {
	// count is len(subs), read without the lock on every outcome.
	count   atomic.Int32
	mu      sync.Mutex
	subs    map[*subscription]struct{}
	logger  *slog.Logger
	warned  time.Time
	dropped int
}

type subscription struct {
	ch    chan *Event
	kinds map[EventKind]bool // nil: every kind
}

// Subscribe returns a channel of the events of the given kinds (every kind
// when none is given) and a function that ends the subscription and closes
// the channel. Events are sent without blocking the jobs: a subscriber that
// falls more than 1,024 events behind loses the newer ones, and the client
// logs a warning saying how many it dropped.
func (c *Client) Subscribe(kinds ...EventKind) (<-chan *Event, func()) {
	s := &subscription{ch: make(chan *Event, eventBuffer)}
	if len(kinds) > 0 {
		s.kinds = map[EventKind]bool{}
		for _, k := range kinds {
			s.kinds[k] = true
		}
	}
	c.events.mu.Lock()
	if c.events.subs == nil {
		c.events.subs = map[*subscription]struct{}{}
	}
	c.events.subs[s] = struct{}{}
	c.events.count.Store(int32(len(c.events.subs)))
	c.events.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			c.events.mu.Lock()
			delete(c.events.subs, s)
			c.events.count.Store(int32(len(c.events.subs)))
			c.events.mu.Unlock()
			close(s.ch)
		})
	}
}

// emit sends e to every subscriber of its kind.
func (s *subscriptions) emit(e *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(e)
}

// emitLocked is emit with the lock that guards subs held (s.mu, or the
// finish feed's for its subscriptions).
func (s *subscriptions) emitLocked(e *Event) {
	for sub := range s.subs {
		if sub.kinds != nil && !sub.kinds[e.Kind] {
			continue
		}
		select {
		case sub.ch <- e:
		default:
			s.dropped++
		}
	}
	if s.dropped > 0 && time.Since(s.warned) > 10*time.Second {
		s.logger.Warn("spool: an event subscriber is too slow; events dropped", "dropped", s.dropped)
		s.warned, s.dropped = time.Now(), 0
	}
}

// active reports whether anyone subscribes, so that no event is built in
// vain.
func (s *subscriptions) active() bool { return s.count.Load() > 0 }

// eventKinds names the results of runs that are events.
var eventKinds = map[engine.Result]EventKind{
	engine.ResultCompleted: EventJobCompleted,
	engine.ResultFailed:    EventJobFailed,
	engine.ResultExhausted: EventJobDiscarded,
	engine.ResultDiscarded: EventJobDiscarded,
	engine.ResultCancelled: EventJobCancelled,
	engine.ResultSnoozed:   EventJobSnoozed,
}

// outcome sends the event of a written outcome, if it is one.
func (s *subscriptions) outcome(o engine.Outcome) {
	if !s.active() {
		return
	}
	if e, ok := eventOf(o); ok {
		s.emit(e)
	}
}

// eventOf is the event of an applied outcome; false for a result that has
// none.
func eventOf(o engine.Outcome) (*Event, bool) {
	kind, ok := eventKinds[o.Result]
	if !ok {
		return nil, false
	}
	e := &Event{Kind: kind, JobID: o.Finish.Lease.ID, JobKind: o.Kind, Queue: o.Queue, Attempt: int(o.Attempt),
		MaxAttempts: int(o.MaxAttempts), Duration: o.Duration, At: time.Now()}
	if o.Finish.Error != nil {
		e.Error = o.Finish.Error.Error
	}
	if kind == EventJobFailed || kind == EventJobSnoozed {
		e.NextRunIn = o.Finish.Delay
	}
	return e, true
}

// retried reports an operator's retry of a job.
func (s *subscriptions) retried(j *JobRow) {
	if !s.active() {
		return
	}
	s.emit(&Event{Kind: EventJobRetried, JobID: j.ID, JobKind: j.Kind, Queue: j.Queue,
		Attempt: int(j.Attempt), MaxAttempts: int(j.MaxAttempts), At: time.Now()})
}

// WorkMiddleware wraps every run of a job's handler in this client: it
// calls next to run the handler (or does not, to skip it) and returns what
// the run should count as. Middleware runs in the order given, the first
// outermost, inside the job's timeout and panic recovery. The job's args
// are in job.Args, encoded. For a many-worker it runs once per job of a
// call, nested: job k's next goes on with job k+1's middleware, the last
// one's with the call, and each returns its own job's result (docs/many.md).
type WorkMiddleware func(ctx context.Context, job *JobRow, next func(context.Context) error) error

// InsertMiddleware wraps every insert through this client (Insert,
// InsertTx, InsertMany, …): it may change the jobs (add metadata for a
// tenant, say) before calling next, which validates and writes them, or
// refuse them by returning an error without calling next. Middleware runs
// in the order given, the first outermost.
type InsertMiddleware func(ctx context.Context, jobs []InsertManyParams, next func(context.Context, []InsertManyParams) error) error

// wrapHandler returns h with the client's work middleware around its Run.
func wrapHandler(h engine.Handler, mws []WorkMiddleware) engine.Handler {
	if len(mws) == 0 {
		return h
	}
	if h.RunMany != nil {
		h.RunMany = wrapMany(h.RunMany, mws)
	}
	run := h.Run
	h.Run = func(ctx context.Context, row *backend.JobRow) error {
		var call func(i int, ctx context.Context) error
		call = func(i int, ctx context.Context) error {
			if i == len(mws) {
				return run(ctx, row)
			}
			return mws[i](ctx, row, func(ctx context.Context) error { return call(i+1, ctx) })
		}
		return call(0, ctx)
	}
	return h
}
