package spool

import (
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Observer receives a client's measurements as they are made, for metrics
// and tracing modules (github.com/spoolq/spool/prometheus, …/otel): the
// core keeps no metrics library of its own. Each method runs on the
// goroutine that measured, in the middle of the client's work, so it must
// return at once: count, observe, never block or call the store. Embed
// NopObserver to implement only some methods.
type Observer interface {
	// JobsInserted: n jobs of kind were written to queue by an insert
	// statement of this client (inside a caller's transaction too, even
	// if that transaction then rolls back; unique inserts that found
	// their key held included).
	JobsInserted(queue, kind string, n int)
	// ClaimDone: one claim of queue returned jobs jobs after took (err
	// when it failed).
	ClaimDone(queue string, jobs int, took time.Duration, err error)
	// JobStarted: a handler starts job; pickup is how long after the job
	// was due (its run time by the store's clock, compared with this
	// machine's: clock skew shows here).
	JobStarted(job *JobRow, pickup time.Duration)
	// JobFinished: the store applied the outcome of a handler's run (an
	// event of kind completed, failed, discarded, cancelled or snoozed).
	JobFinished(e *Event)
	// LeasesLost: n running jobs of queue lost their lease (rescued
	// elsewhere after a stall, or cancelled); their handlers were
	// cancelled.
	LeasesLost(queue string, n int)
	// JobsRescued: as maintenance leader, the client made jobs whose lease
	// ended run again (retried) or discarded them (no attempt left).
	JobsRescued(retried, discarded int)
	// NotifierUp: the wake-up subscription was made (true) or lost
	// (false; the client polls until it is back).
	NotifierUp(up bool)
}

// NopObserver implements Observer doing nothing; embed it to implement only
// some of the methods.
type NopObserver struct{}

// JobsInserted implements Observer.
func (NopObserver) JobsInserted(string, string, int) {}

// ClaimDone implements Observer.
func (NopObserver) ClaimDone(string, int, time.Duration, error) {}

// JobStarted implements Observer.
func (NopObserver) JobStarted(*JobRow, time.Duration) {}

// JobFinished implements Observer.
func (NopObserver) JobFinished(*Event) {}

// LeasesLost implements Observer.
func (NopObserver) LeasesLost(string, int) {}

// JobsRescued implements Observer.
func (NopObserver) JobsRescued(int, int) {}

// NotifierUp implements Observer.
func (NopObserver) NotifierUp(bool) {}

// observers fans measurements out to the configured observers.
type observers []Observer

func (os observers) inserted(rows []*backend.JobInsertParams) {
	if len(os) == 0 {
		return
	}
	type qk struct{ queue, kind string }
	counts := map[qk]int{}
	for _, r := range rows {
		counts[qk{r.Queue, r.Kind}]++
	}
	for k, n := range counts {
		for _, o := range os {
			o.JobsInserted(k.queue, k.kind, n)
		}
	}
}

// engine returns the engine's hooks, nil when there is no observer.
func (os observers) engine() *engine.Observer {
	if len(os) == 0 {
		return nil
	}
	return &engine.Observer{
		Claimed: func(queue string, jobs int, took time.Duration, err error) {
			for _, o := range os {
				o.ClaimDone(queue, jobs, took, err)
			}
		},
		Started: func(row *JobRow, startedAt time.Time) {
			pickup := startedAt.Sub(row.RunAt)
			for _, o := range os {
				o.JobStarted(row, pickup)
			}
		},
		LeasesLost: func(queue string, n int) {
			for _, o := range os {
				o.LeasesLost(queue, n)
			}
		},
		Rescued: func(retried, discarded int) {
			for _, o := range os {
				o.JobsRescued(retried, discarded)
			}
		},
		Notifier: func(up bool) {
			for _, o := range os {
				o.NotifierUp(up)
			}
		},
	}
}

// finished reports an applied outcome to the observers.
func (os observers) finished(o engine.Outcome) {
	e, ok := eventOf(o)
	if !ok {
		return
	}
	for _, ob := range os {
		ob.JobFinished(e)
	}
}
