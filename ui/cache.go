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
// than ttl is served while one refresh runs in the background; only the
// first request waits.
type cache[T any] struct {
	ttl     time.Duration
	compute func(context.Context) (T, error)

	mu      sync.Mutex
	val     T
	at      time.Time // when val was computed; zero: never
	running bool
}

// computeTimeout bounds a background refresh.
const computeTimeout = 30 * time.Second

// get returns the value and when it was computed.
func (c *cache[T]) get(ctx context.Context) (T, time.Time, error) {
	c.mu.Lock()
	if !c.at.IsZero() {
		val, at := c.val, c.at
		if time.Since(at) >= c.ttl && !c.running {
			c.running = true
			go c.refresh()
		}
		c.mu.Unlock()
		return val, at, nil
	}
	c.mu.Unlock()
	val, err := c.compute(ctx)
	if err != nil {
		return val, time.Time{}, err
	}
	now := time.Now()
	c.mu.Lock()
	if c.at.Before(now) {
		c.val, c.at = val, now
	}
	c.mu.Unlock()
	return val, now, nil
}

func (c *cache[T]) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), computeTimeout)
	defer cancel()
	val, err := c.compute(ctx)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	if err == nil && c.at.Before(now) {
		c.val, c.at = val, now
	}
	// On an error the old value stays and the next request tries again.
}
