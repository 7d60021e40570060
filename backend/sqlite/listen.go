package sqlite

import (
	"context"
	"sync"

	"github.com/spoolq/spool/backend"
)

// hub delivers wake-ups to every listener on one store: after an insert of
// runnable jobs, a retry by an administrator, a rescue, and the cancellation
// of a running job, all by this process; and, from the store's watcher, a
// wake-up of every queue when another connection (another process) has
// committed to the file. SQLite has no notifications of its own.
type hub struct {
	mu     sync.Mutex
	nextID int
	subs   map[int]chan backend.Wake
}

func newHub() *hub { return &hub{subs: map[int]chan backend.Wake{}} }

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

// publish sends w to every listener without blocking.
func (h *hub) publish(w backend.Wake) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.subs {
		select {
		case ch <- w:
		default:
		}
	}
}

// publishQueues wakes the producers of each queue once.
func (h *hub) publishQueues(queues map[string]struct{}) {
	for q := range queues {
		h.publish(backend.Wake{Queue: q})
	}
}

// Listen implements backend.Notifier with the store's hub: it delivers
// wake-ups caused by this process (through any backend on the same file),
// and a wake-up of every queue within about 20 ms of another process's
// commit, until ctx ends. Cancellations of running jobs made by other
// processes come from the watcher's reads of spool_cancels, within about
// cancelCheckInterval.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	id, ch := b.st.hub.subscribe()
	defer b.st.hub.unsubscribe(id)
	b.st.startWatcher()
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
