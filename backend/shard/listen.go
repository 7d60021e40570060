package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// listenRetryMax caps the wait before listening again on a shard whose
// listener stopped.
const listenRetryMax = 2 * time.Second

// Listen listens on every shard at once and passes on their wake-ups, with
// cancelled jobs' ids made global. It calls ready once every shard's first
// subscription is in place. A shard whose listener stops (its database is
// unreachable, say) is listened to again after a backoff while the others
// go on, so one shard's outage does not silence the rest: what it misses
// meanwhile is found by polling, as any missed wake-up is. It returns when
// ctx ends, or at once with backend.ErrNoWakeUps when a shard cannot
// deliver wake-ups at all (then clients poll every shard).
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	listeners := make([]func(context.Context, func(), func(backend.Wake)) error, len(b.shards))
	for i, be := range b.shards {
		switch n := be.(type) {
		case backend.Notifier:
			listeners[i] = n.Listen
		case backend.CancelWatcher:
			listeners[i] = func(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
				return n.WatchCancels(ctx, ready, func(id int64) { onWake(backend.Wake{CancelledID: id}) })
			}
		default:
			return fmt.Errorf("listen: shard %d (%s) delivers no wake-ups: %w", i, be.Name(), backend.ErrNoWakeUps)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu      sync.Mutex // serialises onWake, and guards pending
		pending = len(b.shards)
		wg      sync.WaitGroup
	)
	for i, listen := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once // the first subscription counts toward ready
			wait := 50 * time.Millisecond
			for ctx.Err() == nil {
				var subscribed atomic.Bool
				err := listen(ctx, func() {
					subscribed.Store(true)
					first := false
					once.Do(func() { first = true })
					if !first {
						// A subscription again after an outage: wake every
						// queue, for what was missed meanwhile.
						mu.Lock()
						onWake(backend.Wake{})
						mu.Unlock()
						return
					}
					mu.Lock()
					pending--
					all := pending == 0
					mu.Unlock()
					if all {
						ready()
					}
				}, func(w backend.Wake) {
					if w.CancelledID != 0 {
						w.CancelledID = global(w.CancelledID, i)
					}
					mu.Lock()
					defer mu.Unlock()
					onWake(w)
				})
				if errors.Is(err, backend.ErrNoWakeUps) {
					cancel(fmt.Errorf("listen: shard %d: %w", i, err))
					return
				}
				if subscribed.Load() {
					wait = 50 * time.Millisecond
				}
				timer := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
				timer.Stop()
				wait = min(wait*2, listenRetryMax)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// AddWakeDemand implements backend.WakeDemand: waiting is registered with
// every shard that has the capability (the client's idle workers claim
// from every shard).
func (b *Backend) AddWakeDemand(waiting func() bool) (remove func()) {
	return b.addToEach(func(be backend.Backend) func() { return backend.AddWakeDemandTo(be, waiting) })
}

// AddWakeQueues implements backend.WakeQueues: queues are registered with
// every shard that has the capability.
func (b *Backend) AddWakeQueues(queues []string) (remove func()) {
	return b.addToEach(func(be backend.Backend) func() { return backend.AddWakeQueuesTo(be, queues) })
}

// addToEach registers with every shard by add, and returns the function
// that removes all of those registrations.
func (b *Backend) addToEach(add func(backend.Backend) (remove func())) (remove func()) {
	removes := make([]func(), len(b.shards))
	for i, be := range b.shards {
		removes[i] = add(be)
	}
	return func() {
		for _, r := range removes {
			r()
		}
	}
}

var (
	_ backend.Notifier   = (*Backend)(nil)
	_ backend.WakeDemand = (*Backend)(nil)
	_ backend.WakeQueues = (*Backend)(nil)
)
