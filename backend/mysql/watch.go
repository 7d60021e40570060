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
	seen := cancelsSeen{}
	if _, err := b.readCancelEvents(ctx, seen); err != nil {
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
		ids, err := b.readCancelEvents(ctx, seen)
		if err != nil {
			return err
		}
		for _, id := range ids {
			onCancel(id)
		}
	}
}

// cancelsSeen holds the cancellation events read (by seq) and when, until
// they leave the read's window.
type cancelsSeen map[int64]time.Time

// readCancelEvents reads the cancellation events of the last 10 seconds and
// returns the jobs of those not in seen, adding them to it.
func (b *Backend) readCancelEvents(ctx context.Context, seen cancelsSeen) ([]int64, error) {
	rows, err := b.db.QueryContext(ctx, b.sql.cancelEventsRecent)
	if err != nil {
		return nil, fmt.Errorf("read cancellation events: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var ids []int64
	for rows.Next() {
		var seq, id int64
		if err := rows.Scan(&seq, &id); err != nil {
			return nil, fmt.Errorf("read cancellation events: %w", err)
		}
		if _, ok := seen[seq]; ok {
			continue
		}
		seen[seq] = now
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read cancellation events: %w", err)
	}
	// Forget what has left the read's window (10 s by the database's
	// clock; 30 s here leaves room for clock skew).
	for seq, at := range seen {
		if now.Sub(at) > 30*time.Second {
			delete(seen, seq)
		}
	}
	return ids, nil
}
