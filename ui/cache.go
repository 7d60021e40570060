package ui

import (
	"context"
	"sync"
	"time"
)

// cache keeps one value that is expensive to compute (counting every job
// by queue and state reads the whole table: 0.25 s with 10^6 jobs on
// PostgreSQL), shared by every request: each open page refreshes every few
// seconds, and many viewers must not multiply the queries. A value older
// than ttl is served while one refresh runs in the background; requests
// before the first value wait for it a little, then go on without it.
type cache[T any] struct {
	ttl     time.Duration
	compute func(context.Context) (T, error)

	mu      sync.Mutex
	val     T
	at      time.Time // when val was computed; zero: never
	running bool
	// ready is closed when the refresh under way ends (nil when none is).
	ready chan struct{}
	err   error // the last refresh's error, while there is no value
}

// computeTimeout bounds a background refresh.
const computeTimeout = 30 * time.Second

// get returns the value and when it was computed. With no value yet it
// waits for the first computation up to wait (or ctx's end), and returns a
// zero time when that did not finish (the caller shows the page without
// the value; a later refresh has it).
func (c *cache[T]) get(ctx context.Context, wait time.Duration) (T, time.Time, error) {
	c.mu.Lock()
	if !c.at.IsZero() {
		val, at := c.val, c.at
		if time.Since(at) >= c.ttl {
			c.startLocked()
		}
		c.mu.Unlock()
		return val, at, nil
	}
	ready := c.startLocked()
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() && c.err != nil && !c.running {
		return c.val, time.Time{}, c.err
	}
	return c.val, c.at, nil
}

// warm starts the first computation.
func (c *cache[T]) warm() {
	c.mu.Lock()
	c.startLocked()
	c.mu.Unlock()
}

// startLocked starts a refresh unless one is under way, and returns the
// channel closed when it ends.
func (c *cache[T]) startLocked() chan struct{} {
	if !c.running {
		c.running = true
		c.ready = make(chan struct{})
		go c.refresh(c.ready)
	}
	return c.ready
}

func (c *cache[T]) refresh(ready chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), computeTimeout)
	defer cancel()
	val, err := c.compute(ctx)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	close(ready)
	if err != nil {
		// The old value stays and the next request tries again.
		c.err = err
		return
	}
	c.val, c.at, c.err = val, now, nil
}
