package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// completionCount counts the completions a backend wrote: each
// OutcomeComplete that JobFinishMany applied (the store did not reject its
// lease). It is the same definition 'spool bench drain' uses, and for River
// the runner counts the completed events River emits for rows its
// completion statement returned.
type completionCount struct {
	target  int64
	written atomic.Int64
	once    sync.Once
	done    chan struct{}
	doneAt  time.Time // set before done is closed
}

// countingBackend wraps a backend and feeds a completionCount.
type countingBackend struct {
	backend.Backend
	c *completionCount
}

// countingNotifier is a countingBackend over a backend with push wake-ups,
// so that the client keeps them.
type countingNotifier struct {
	countingBackend
	n backend.Notifier
}

// countWrittenCompletions wraps be; done closes when target completions are
// written.
func countWrittenCompletions(be backend.Backend, target int64) (backend.Backend, *completionCount) {
	c := &completionCount{target: target, done: make(chan struct{})}
	cb := countingBackend{Backend: be, c: c}
	if n, ok := be.(backend.Notifier); ok {
		return &countingNotifier{countingBackend: cb, n: n}, c
	}
	return &cb, c
}

// JobFinishMany implements backend.Backend, counting applied completions.
func (b *countingBackend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	res, err := b.Backend.JobFinishMany(ctx, p)
	if err != nil {
		return res, err
	}
	n := int64(res.CountApplied(p, isCompletion))
	if n > 0 && b.c.written.Add(n) >= b.c.target {
		b.c.once.Do(func() {
			b.c.doneAt = time.Now()
			close(b.c.done)
		})
	}
	return res, nil
}

// Listen implements backend.Notifier.
func (b *countingNotifier) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return b.n.Listen(ctx, ready, onWake)
}

// AddWakeDemand implements backend.WakeDemand where the wrapped notifier
// does (PostgreSQL's relay of inserts from SQL polls by it).
func (b *countingNotifier) AddWakeDemand(waiting func() bool) (remove func()) {
	return backend.AddWakeDemandTo(b.n, waiting)
}

// AddWakeQueues implements backend.WakeQueues where the wrapped notifier
// does (MySQL's looker reads new jobs per set of queues).
func (b *countingNotifier) AddWakeQueues(queues []string) (remove func()) {
	return backend.AddWakeQueuesTo(b.n, queues)
}

// isCompletion matches a finish that completes its job.
func isCompletion(f backend.JobFinish) bool { return f.Outcome == backend.OutcomeComplete }
