package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/backend"
)

// newJobsInterval is how often Listen looks for jobs inserted by other
// processes while jobs keep coming: one primary-key range read from the
// last id it saw. MySQL has no LISTEN/NOTIFY; without it, a job inserted by
// another process waited for the next poll.
const newJobsInterval = 5 * time.Millisecond

// idleJobsInterval is how often Listen looks once no new job has come for
// idleAfter: the look interval doubles up to it, and goes back to
// newJobsInterval as soon as a look finds a job. Every worker process
// looks on its own, so idle fleets would otherwise cost the server 200
// reads a second per process for nothing; the price is up to 50 ms more
// pickup for the first job after a quiet spell.
const (
	idleJobsInterval = 50 * time.Millisecond
	idleAfter        = 2 * time.Second
)

// newJobsBatch bounds the ids one look reads; more means another look at
// once.
const newJobsBatch = 1000

// Listen implements backend.Notifier: it wakes the queues of jobs other
// processes insert, found by reading the jobs above the highest id it has
// seen every newJobsInterval (idleJobsInterval when none has come for a
// while), wakes a queue that another process resumed
// (the paused queues, read every watchCancelsInterval), and reports
// cancelled running jobs as WatchCancels does. A job whose insert commits after a later id's was seen
// is not reported by itself: the next insert into its queue, or the
// client's poll, finds it.
func (b *Backend) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cancels := make(chan error, 1)
	cancelsReady := make(chan struct{})
	go func() {
		err := b.WatchCancels(ctx, func() { close(cancelsReady) }, func(id int64) { onWake(backend.Wake{CancelledID: id}) })
		cancel(err)
		cancels <- err
	}()
	var last int64
	if err := b.db.QueryRowContext(ctx, b.sql.maxJobID).Scan(&last); err != nil {
		cancel(err)
		<-cancels
		return fmt.Errorf("read the newest job id: %w", err)
	}
	paused, err := b.pausedQueues(ctx)
	if err != nil {
		cancel(err)
		<-cancels
		return err
	}
	select {
	case <-cancelsReady:
	case err := <-cancels:
		return err
	}
	// Jobs this process released from waiting (workflow.go) are heard
	// from its own hub: they are no new ids.
	hubReady := make(chan struct{})
	go func() { _ = b.released.Listen(ctx, func() { close(hubReady) }, onWake) }()
	select {
	case <-hubReady:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	ready()
	interval, lastFound := newJobsInterval, time.Now()
	t := time.NewTimer(interval)
	defer t.Stop()
	pauses := time.NewTicker(watchCancelsInterval)
	defer pauses.Stop()
	queues := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			err := context.Cause(ctx)
			if err == context.Canceled {
				err = ctx.Err()
			}
			return err
		case <-pauses.C:
			now, err := b.pausedQueues(ctx)
			if err != nil {
				return err
			}
			for q := range paused {
				if !now[q] {
					onWake(backend.Wake{Queue: q})
				}
			}
			paused = now
			continue
		case <-t.C:
		}
		for {
			n := 0
			clear(queues)
			rows, err := b.db.QueryContext(ctx, b.sql.newJobs, last, newJobsBatch)
			if err != nil {
				return fmt.Errorf("read new jobs: %w", err)
			}
			for rows.Next() {
				var (
					id    int64
					queue string
				)
				if err := rows.Scan(&id, &queue); err != nil {
					rows.Close()
					return fmt.Errorf("read new jobs: %w", err)
				}
				last, n = max(last, id), n+1
				queues[queue] = true
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read new jobs: %w", err)
			}
			for q := range queues {
				onWake(backend.Wake{Queue: q})
			}
			if n > 0 {
				interval, lastFound = newJobsInterval, time.Now()
			}
			if n < newJobsBatch {
				break
			}
		}
		if time.Since(lastFound) > idleAfter {
			interval = min(2*interval, idleJobsInterval)
		}
		t.Reset(interval)
	}
}

// pausedQueues reads the names of the paused queues.
func (b *Backend) pausedQueues(ctx context.Context) (map[string]bool, error) {
	all, err := b.QueuePausedAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(all))
	for _, q := range all {
		out[q.Queue] = true
	}
	return out, nil
}
