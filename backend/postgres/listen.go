package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// Listen implements backend.Notifier on a dedicated connection from the pool.
// The connection is closed, not returned, when Listen ends: it may still be
// subscribed or mid-wait.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Claim floors rely on seeing every insert notification from here on.
	b.floors.listen(+1)
	defer b.floors.listen(-1)
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen: %w", err)
		}
		if id, ok := strings.CutPrefix(n.Payload, cancelPrefix); ok {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				onWake(backend.Wake{CancelledID: n})
			}
			continue
		}
		queue, key, ok := parseInsertNotice(n.Payload)
		if ok {
			b.floors.lower(queue, key)
		} else {
			b.floors.reset(queue)
		}
		onWake(backend.Wake{Queue: queue})
	}
}

// cancelPrefix marks a cancel notification; queue names cannot contain ':'.
const cancelPrefix = "cancel:"
