package memory

import (
	"context"

	"github.com/spoolq/spool/backend"
)

// Listen implements backend.Notifier: wake-ups for jobs made runnable and
// for running jobs cancelled, through any handle on the store.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return b.s.hub.Listen(ctx, ready, onWake)
}
