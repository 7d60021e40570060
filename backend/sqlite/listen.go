package sqlite

import (
	"context"

	"github.com/spoolq/spool/backend"
)

// Listen implements backend.Notifier with the store's hub, which delivers
// wake-ups to every listener on one store: after an insert of runnable
// jobs, a retry by an administrator, a rescue, and the cancellation of a
// running job, all by this process (through any backend on the same file);
// and, from the store's watcher, a wake-up of every queue within about 20 ms
// of another process's commit to the file, until ctx ends. SQLite has no
// notifications of its own. Cancellations of running jobs made by other
// processes come from the watcher's reads of spool_cancels, within about
// cancelCheckInterval.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return b.st.hub.Listen(ctx, func() {
		b.st.startWatcher()
		ready()
	}, onWake)
}
