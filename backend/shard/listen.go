package shard

import (
	"context"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

// Listen listens on every shard at once and passes on their wake-ups, with
// cancelled jobs' ids made global. It calls ready once every shard's
// subscription is in place, and returns when ctx ends or any shard's
// listener stops (the others are stopped too), with that shard's error. A
// shard that is neither a Notifier nor a CancelWatcher makes it return
// backend.ErrNoWakeUps at once: clients then poll every shard.
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex // serialises onWake, and guards pending
		pending  = len(b.shards)
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for i, listen := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := listen(ctx, func() {
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
			errOnce.Do(func() {
				if err == nil {
					err = ctx.Err()
				}
				firstErr = fmt.Errorf("shard %d: %w", i, err)
			})
			cancel()
		}()
	}
	wg.Wait()
	if ctx := context.Cause(ctx); ctx != nil && firstErr == nil {
		return ctx
	}
	return firstErr
}

var _ backend.Notifier = (*Backend)(nil)
