package mysql

import (
	"context"
	"fmt"
	"time"
)

// watchCancelsInterval is how often WatchCancels reads recent cancellation
// events: one indexed read of a table that holds a minute of cancellations.
const watchCancelsInterval = 200 * time.Millisecond

// WatchCancels implements backend.CancelWatcher: it reads the cancellation
// events of the last 10 seconds every watchCancelsInterval and reports the
// ones it has not seen. Events that exist when it starts are not reported:
// they were made before ready.
func (b *Backend) WatchCancels(ctx context.Context, ready func(), onCancel func(id int64)) error {
	seen := map[int64]time.Time{}
	look := func(report bool) error {
		rows, err := b.db.QueryContext(ctx, b.sql.cancelEventsRecent)
		if err != nil {
			return fmt.Errorf("read cancellation events: %w", err)
		}
		defer rows.Close()
		now := time.Now()
		for rows.Next() {
			var seq, id int64
			if err := rows.Scan(&seq, &id); err != nil {
				return fmt.Errorf("read cancellation events: %w", err)
			}
			if _, ok := seen[seq]; ok {
				continue
			}
			seen[seq] = now
			if report {
				onCancel(id)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read cancellation events: %w", err)
		}
		// Forget what has left the read's window (10 s by the database's
		// clock; 30 s here leaves room for clock skew).
		for seq, at := range seen {
			if now.Sub(at) > 30*time.Second {
				delete(seen, seq)
			}
		}
		return nil
	}
	if err := look(false); err != nil {
		return err
	}
	ready()
	t := time.NewTicker(watchCancelsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		if err := look(true); err != nil {
			return err
		}
	}
}
