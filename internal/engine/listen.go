package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spoolq/spool/backend"
)

// listenStartWait bounds how long Start waits for the wake-up subscription.
const listenStartWait = 5 * time.Second

// listener keeps a wake-up subscription and turns what it hears into calls:
// a wake-up for a queue, for every queue (also after each reconnection,
// since inserts may have been missed meanwhile), or the cancellation of a
// job (the engine then beats at once, which finds the lease gone and
// cancels the handler).
type listener struct {
	n        backend.Notifier
	observer *Observer
	logger   *slog.Logger
	// wake wakes the producer of a queue, for a wake-up listing jobs
	// (backend.Wake.Jobs; nil: not listed).
	wake      func(queue string, jobs []int64)
	wakeAll   func()
	cancelled func(id int64)
	// router, when set, decides which routable wake-ups this process
	// answers (route.go); wakeRouted wakes a producer for one it answers.
	router     *router
	wakeRouted func(queue string, hops int, jobs []int64)
}

// run listens until ctx ends, reconnecting with jittered backoff. settled is
// called once the first subscription is in place or the first attempt has
// failed.
func (l *listener) run(ctx context.Context, settled func()) {
	defer settled()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := l.n.Listen(ctx, func() {
			l.observer.notifier(true)
			if l.router != nil {
				l.router.setListening(true)
			}
			// Anything inserted while we were not listening: look now.
			// At start this comes before settled, which lets Start go on
			// to start the producers: their first claims cover it.
			l.wakeAll()
			settled()
		}, func(w backend.Wake) {
			switch {
			case w.Note != "":
				if l.router != nil {
					l.router.heard(w.Note, time.Now())
				}
			case w.CancelledID != 0:
				l.cancelled(w.CancelledID)
			case w.Queue == "":
				l.wakeAll()
			case w.Route != 0 && l.router != nil:
				if mine, _ := l.router.answers(w.Queue, w.Route, w.Window, time.Now()); mine {
					l.wakeRouted(w.Queue, w.Hops, w.Jobs)
				}
			default:
				l.wake(w.Queue, w.Jobs)
			}
		})
		settled()
		if l.router != nil {
			l.router.setListening(false)
		}
		if ctx.Err() != nil {
			return
		}
		l.observer.notifier(false)
		if errors.Is(err, backend.ErrNoWakeUps) {
			l.logger.Warn("spool: no wake-ups can reach this client; it finds new jobs by polling every PollInterval", "error", err)
			return
		}
		if time.Since(started) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		l.logger.Warn("spool: wake-up listener stopped; polling until it reconnects", "error", err, "retry_in", backoff)
		if !sleepCtx(ctx, jitter(backoff)) {
			return
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// maxRetryBackoff bounds the waits between attempts against a database
// that failed: the listener's reconnects, claims and outcome writes. It
// bounds how long workers stay idle after the database is back (a failover
// measured 18 s to the first start with 10 s waits, 11 s to the first
// successful write); an attempt against a server that is down costs
// little, and each failed one logs its cause.
const maxRetryBackoff = 2 * time.Second

// cancelsOnly makes a CancelWatcher a Notifier that sends only
// cancellations.
type cancelsOnly struct{ cw backend.CancelWatcher }

func (c cancelsOnly) Listen(ctx context.Context, ready func(), onWake func(backend.Wake)) error {
	return c.cw.WatchCancels(ctx, ready, func(id int64) { onWake(backend.Wake{CancelledID: id}) })
}
