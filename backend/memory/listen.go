package memory

import (
	"context"
	"sync"

	"github.com/spoolq/spool/backend"
)

// Listen implements backend.Notifier: wake-ups for jobs made runnable and
// for running jobs cancelled, through any handle on the store.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	id, ch := b.s.hub.subscribe()
	defer b.s.hub.unsubscribe(id)
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

// hub delivers wake-ups to the listeners of one store.
type hub struct {
	mu     sync.Mutex
	nextID int
	subs   map[int]chan backend.Wake
}

// subscribeBuffer bounds the wake-ups queued for a slow listener; wake-ups
// are hints, so one that does not fit is dropped (a poll covers it).
const subscribeBuffer = 256

func (h *hub) subscribe() (int, <-chan backend.Wake) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	ch := make(chan backend.Wake, subscribeBuffer)
	h.subs[h.nextID] = ch
	return h.nextID, ch
}

func (h *hub) unsubscribe(id int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, id)
}

func (h *hub) publish(ws []backend.Wake) {
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
