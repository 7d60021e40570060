package spool

import (
	"context"
	"errors"

	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// Await waits until job id is finished (completed, discarded or
// cancelled) and returns it as stored then: its state, its Output, its
// error history (the last entry of Errors is the last error). The job may
// be run by any process. Await reads the job once at the start and again
// whenever the client learns that it finished: at once when this client
// ran it, and otherwise from the client's read of the jobs finished since
// its last read (every AwaitPoll, shared by every Await and SubscribeAll of
// the client, and only while one is waiting), with one read of the job a
// second as a safety net. It returns an error matching ErrNotFound for a
// job that does not exist (or was deleted: CompletedRetention < 0 deletes a
// job as it completes), and ctx's cause when ctx ends first.
// docs/await.md has the details.
func (c *Client) Await(ctx context.Context, id int64) (*JobRow, error) {
	w := c.feed.await(c, id)
	defer c.feed.unawait(id, w)
	safety := time.NewTimer(awaitSafetyPoll)
	defer safety.Stop()
	for {
		row, err := c.backend.JobGet(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("await job %d: %w", id, context.Cause(ctx))
			}
			return nil, fmt.Errorf("await job %d: %w", id, err)
		}
		if finalState(row.State) {
			return row, nil
		}
		select {
		case <-w:
		case <-safety.C:
			safety.Reset(awaitSafetyPoll)
		case <-ctx.Done():
			return nil, fmt.Errorf("await job %d: %w", id, context.Cause(ctx))
		}
	}
}

// SubscribeAll is Subscribe for the jobs that finish in every process of
// the store, not only in this client: it returns a channel of an event per
// job that completed (EventJobCompleted), was discarded (EventJobDiscarded)
// or cancelled (EventJobCancelled), whoever ran or cancelled it, and a
// function that ends the subscription. An event carries JobID, JobKind,
// Queue and At (when the job finished, by the store's clock); the fields
// of a run (Attempt, Duration, Error…) are zero. The client reads the jobs
// finished since its last read every AwaitPoll while anyone subscribes or
// awaits (and never otherwise), so events come up to AwaitPoll late, in
// finish order, each once; the first read goes back about a second before
// the call. Jobs deleted as they complete (CompletedRetention < 0) are not
// seen. A subscriber more than 1,024 events behind loses the newer ones.
func (c *Client) SubscribeAll(kinds ...EventKind) (<-chan *Event, func()) {
	s := &subscription{ch: make(chan *Event, eventBuffer)}
	if len(kinds) > 0 {
		s.kinds = map[EventKind]bool{}
		for _, k := range kinds {
			s.kinds[k] = true
		}
	}
	f := &c.feed
	f.mu.Lock()
	if f.all.subs == nil {
		f.all.subs = map[*subscription]struct{}{}
		f.all.logger = c.events.logger
	}
	f.all.subs[s] = struct{}{}
	f.all.count.Store(int32(len(f.all.subs)))
	f.startLocked(c)
	f.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.all.subs, s)
			f.all.count.Store(int32(len(f.all.subs)))
			f.mu.Unlock()
			close(s.ch)
		})
	}
}

const (
	// awaitSafetyPoll is how often Await reads its job whatever else
	// happens: the feed can miss a finish (clock skew beyond feedOverlap,
	// a read that failed).
	awaitSafetyPoll = time.Second
	// feedOverlap is how far each read of finished jobs goes back before
	// the latest finish it saw: a transaction that stamped its finish
	// earlier but committed later is still seen.
	feedOverlap = time.Second
	// feedPage is how many finished jobs one read returns.
	feedPage = 1000
	// feedLinger is how long the feed's loop outlives its last waiter.
	feedLinger = 30 * time.Second
)

func finalState(s JobState) bool {
	return s == backend.StateCompleted || s == backend.StateDiscarded || s == backend.StateCancelled
}

// finishFeed tells Await calls and SubscribeAll subscribers of finished
// jobs. Its loop runs only while one of them waits; a client that never
// awaits pays one atomic load per outcome.
type finishFeed struct {
	// active counts awaited jobs' waiters, read on every outcome.
	active atomic.Int32
	// announcer is the store's FinishAnnouncer when Config.AnnounceFinishes
	// asks for it, else nil.
	announcer backend.FinishAnnouncer
	// announce holds the ids to announce; announcing says a goroutine is
	// announcing them.
	announce   []int64
	announcing bool
	mu         sync.Mutex
	waiters    map[int64]map[chan struct{}]struct{}
	all        subscriptions
	running    bool
	kick       chan struct{}
}

// await registers a waiter for id and starts the loop if needed.
func (f *finishFeed) await(c *Client, id int64) chan struct{} {
	w := make(chan struct{}, 1)
	f.mu.Lock()
	if f.waiters == nil {
		f.waiters = map[int64]map[chan struct{}]struct{}{}
	}
	if f.waiters[id] == nil {
		f.waiters[id] = map[chan struct{}]struct{}{}
	}
	f.waiters[id][w] = struct{}{}
	f.active.Add(1)
	f.startLocked(c)
	f.mu.Unlock()
	return w
}

func (f *finishFeed) unawait(id int64, w chan struct{}) {
	f.mu.Lock()
	delete(f.waiters[id], w)
	if len(f.waiters[id]) == 0 {
		delete(f.waiters, id)
	}
	f.active.Add(-1)
	f.mu.Unlock()
}

// wakeLocked wakes the waiters of id; f.mu is held.
func (f *finishFeed) wakeLocked(id int64) {
	for w := range f.waiters[id] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// local is told of every outcome this client's workers wrote.
func (f *finishFeed) local(o engine.Outcome) {
	if f.active.Load() == 0 && f.announcer == nil {
		return
	}
	switch o.Result {
	case engine.ResultCompleted, engine.ResultExhausted, engine.ResultDiscarded, engine.ResultCancelled:
		f.mu.Lock()
		f.wakeLocked(o.Finish.Lease.ID)
		if f.announcer != nil {
			f.announce = append(f.announce, o.Finish.Lease.ID)
			if !f.announcing {
				f.announcing = true
				go f.announceLoop()
			}
		}
		f.mu.Unlock()
	}
}

// announceLoop announces the finished ids gathered while the last
// announcement was out, one call per batch, until none is left: the ids
// of outcomes written together go out together.
func (f *finishFeed) announceLoop() {
	for {
		f.mu.Lock()
		ids := f.announce
		f.announce = nil
		if len(ids) == 0 {
			f.announcing = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A lost announcement delays awaiters until their next read.
		_ = f.announcer.AnnounceFinished(ctx, ids)
		cancel()
	}
}

// listen runs the store's FinishNotifier, if it has one, while the feed
// runs: ids it reports wake their waiters at once, and any report makes
// the feed read (for subscribers, and for stores that report only a
// change). It tries again a second after a failure.
func (f *finishFeed) listen(ctx context.Context, n backend.FinishNotifier) {
	for ctx.Err() == nil {
		err := n.ListenFinished(ctx, func() {}, func(ids []int64) {
			f.mu.Lock()
			for _, id := range ids {
				f.wakeLocked(id)
			}
			f.mu.Unlock()
			if ids == nil || f.all.active() {
				select {
				case f.kick <- struct{}{}:
				default:
				}
			}
		})
		if errors.Is(err, backend.ErrNoWakeUps) {
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// idle reports whether nobody waits; f.mu is held.
func (f *finishFeed) idleLocked() bool {
	return len(f.waiters) == 0 && len(f.all.subs) == 0
}

// startLocked starts the loop unless it runs; f.mu is held.
func (f *finishFeed) startLocked(c *Client) {
	if f.running {
		return
	}
	f.running = true
	if f.kick == nil {
		f.kick = make(chan struct{}, 1)
	}
	go f.run(c)
}

// run reads the jobs finished since its last read, every AwaitPoll, and
// hands them to the waiters and subscribers, until nobody waits.
func (f *finishFeed) run(c *Client) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n, ok := c.backend.(backend.FinishNotifier); ok {
		go f.listen(ctx, n)
	}
	since := time.Now().Add(-feedOverlap)
	seen := map[int64]time.Time{}
	t := time.NewTimer(0)
	defer t.Stop()
	var warned, idleSince time.Time
	for {
		select {
		case <-t.C:
		case <-f.kick:
		}
		f.mu.Lock()
		if f.idleLocked() {
			// Nobody waits: no read. The loop (and the store's
			// notification connection) stays a while for the next
			// waiter, so that short awaits in a row do not each open one.
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) >= feedLinger {
				f.running = false
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			t.Reset(c.config.AwaitPoll)
			continue
		}
		f.mu.Unlock()
		if !idleSince.IsZero() {
			// Finishes while nobody waited concern nobody: a waiter
			// read its job itself after it registered.
			idleSince = time.Time{}
			since = time.Now().Add(-feedOverlap)
			clear(seen)
		}
		latest, err := f.read(ctx, c.backend, since, seen)
		if err != nil && time.Since(warned) > 10*time.Second {
			warned = time.Now()
			c.events.logger.Warn("spool: reading finished jobs for Await and SubscribeAll failed; trying again", "error", err)
		}
		if next := latest.Add(-feedOverlap); next.After(since) {
			since = next
			for id, at := range seen {
				if at.Before(since) {
					delete(seen, id)
				}
			}
		}
		t.Reset(c.config.AwaitPoll)
	}
}

// read reads the jobs finished after since, page by page (keyset on
// finish time and id: one finish batch stamps many jobs with one time),
// hands on those not seen yet, and returns the latest finish time read
// (since when none).
func (f *finishFeed) read(ctx context.Context, be backend.Backend, since time.Time, seen map[int64]time.Time) (time.Time, error) {
	latest := since
	p := &backend.JobFinishedSinceParams{Since: since, Limit: feedPage}
	for {
		jobs, err := be.JobFinishedSince(ctx, p)
		if err != nil {
			return latest, err
		}
		f.mu.Lock()
		for _, j := range jobs {
			if _, ok := seen[j.ID]; ok {
				continue
			}
			seen[j.ID] = j.FinalizedAt
			f.wakeLocked(j.ID)
			if f.all.active() {
				f.all.emitLocked(finishedEvent(j))
			}
		}
		f.mu.Unlock()
		if len(jobs) == 0 {
			return latest, nil
		}
		last := jobs[len(jobs)-1]
		if last.FinalizedAt.After(latest) {
			latest = last.FinalizedAt
		}
		if len(jobs) < feedPage {
			return latest, nil
		}
		p.Since, p.AfterID = last.FinalizedAt, last.ID
	}
}

// finishedEvent is the event of a job another process may have finished.
func finishedEvent(j *backend.FinishedJob) *Event {
	e := &Event{JobID: j.ID, JobKind: j.Kind, Queue: j.Queue, At: j.FinalizedAt}
	switch j.State {
	case backend.StateCompleted:
		e.Kind = EventJobCompleted
	case backend.StateDiscarded:
		e.Kind = EventJobDiscarded
	default:
		e.Kind = EventJobCancelled
	}
	return e
}
