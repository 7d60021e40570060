// Package wakehub delivers wake-ups within one process, for the backends
// whose database has no notifications of its own (memory, SQLite): every
// change that makes jobs runnable or cancels a running job publishes to the
// store's hub, and every Listen on that store hears it.
//
// Wake-ups are hints: a listener that falls behind loses the ones that do not
// fit its buffer, and its poll covers them. Publishing never blocks, so a
// slow listener cannot hold up a writer.
package wakehub

import (
	"context"
	"sync"

	"github.com/spoolq/spool/backend"
)

// Buffer bounds the wake-ups queued for one slow listener; one that does not
// fit is dropped (a poll covers it).
const Buffer = 256

// Hub delivers wake-ups to the listeners of one store. Its methods are safe
// for concurrent use; create one with New.
type Hub struct {
	mu     sync.Mutex
	nextID int
	subs   map[int]chan backend.Wake
}

// New returns a hub with no listeners.
func New() *Hub { return &Hub{subs: map[int]chan backend.Wake{}} }

// Publish sends each of ws to every listener without blocking; a wake-up
// that does not fit a listener's buffer is dropped for that listener.
func (h *Hub) Publish(ws ...backend.Wake) {
	if len(ws) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.subs {
		for _, w := range ws {
			select {
			case ch <- w:
			default:
			}
		}
	}
}

// PublishQueues wakes the producers of each queue once.
func (h *Hub) PublishQueues(queues map[string]struct{}) {
	for q := range queues {
		h.Publish(backend.Wake{Queue: q})
	}
}

// Listen implements the body of backend.Notifier's Listen on the hub: it
// subscribes, then calls ready (so that a wake-up published after ready
// returns is heard), then calls onWake for each wake-up until ctx ends, and
// returns ctx's cause. It unsubscribes before it returns.
func (h *Hub) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	id, ch := h.subscribe()
	defer h.unsubscribe(id)
	ready()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case w := <-ch:
			onWake(w)
		}
	}
}

func (h *Hub) subscribe() (int, <-chan backend.Wake) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	ch := make(chan backend.Wake, Buffer)
	h.subs[h.nextID] = ch
	return h.nextID, ch
}

func (h *Hub) unsubscribe(id int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, id)
}
