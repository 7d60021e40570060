// Package maintenance is the work one client does for all: an election
// among the clients of a store picks a leader, and the leader returns jobs
// whose lease ended (rescue) and deletes finished jobs past their retention
// (cleanup). Leading tells the periodic job firer when to fire.
package maintenance

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// LeaderName is the election that decides which client runs maintenance.
const LeaderName = "maintenance"

// Config is what maintenance runs with, defaults filled in by the caller.
type Config struct {
	ClientID        string
	LeaseDuration   time.Duration // the job lease; the leader's term is the larger of it and 5 s
	RescueInterval  time.Duration
	CleanupInterval time.Duration
	// Retention per final state; 0 or less keeps that state's jobs (a
	// negative CompletedRetention means completed jobs are deleted as they
	// complete, so cleanup has none to delete).
	CompletedRetention, DiscardedRetention, CancelledRetention time.Duration
	// Rescued, when not nil, is told of every rescue batch that found jobs.
	Rescued func(retried, discarded int)
}

// Maintainer runs maintenance for one client.
type Maintainer struct {
	be      backend.Backend
	cfg     Config
	logger  *slog.Logger
	leading atomic.Bool
	// termEnds (Unix nanoseconds) is when the term won by the last
	// successful election ends at the latest: the election was sent then
	// minus the term, and the store started the term no earlier.
	termEnds atomic.Int64
	// won is poked when the election makes this client the leader, so
	// that maintenance starts at once (capacity 1).
	won chan struct{}
	// firerWon is poked likewise for the periodic firer (Won).
	firerWon chan struct{}
}

// Won returns a channel that receives (capacity 1, never closed) each time
// an election makes this client the leader, so that the periodic firer
// starts leading at once rather than at its next look: a periodic job new
// to the store fires only from its first record on, made when the firer
// first leads.
func (m *Maintainer) Won() <-chan struct{} { return m.firerWon }

// Leading reports whether this client leads: its last election made it
// the leader, and that term has not ended. A failed renewal does not end
// it; no other client can win before the term ends. A leader that stalls
// past its term may still believe it leads; what it does as leader must be
// safe to do twice.
func (m *Maintainer) Leading() bool {
	return m.leading.Load() && time.Now().UnixNano() < m.termEnds.Load()
}

// New returns a maintainer over be.
func New(be backend.Backend, cfg Config, logger *slog.Logger) *Maintainer {
	return &Maintainer{be: be, cfg: cfg, logger: logger, won: make(chan struct{}, 1), firerWon: make(chan struct{}, 1)}
}

// term is the leader's term: the larger of the job lease and 5 s.
func (m *Maintainer) term() time.Duration { return max(m.cfg.LeaseDuration, 5*time.Second) }

// Run takes part in the election until ctx ends, and while it leads,
// rescues and cleans up on their intervals. The election runs on a loop of
// its own, so a slow rescue or cleanup never delays the renewal of the
// term.
func (m *Maintainer) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.elect(ctx)
	}()
	defer func() { <-done }()
	cfg := &m.cfg
	tick := min(cfg.RescueInterval, m.term()/3)
	t := time.NewTicker(tick)
	defer t.Stop()
	var nextRescue, nextCleanup time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.won:
		}
		if !m.Leading() {
			continue
		}
		now := time.Now()
		if !now.Before(nextRescue) {
			m.rescue(ctx)
			nextRescue = dueAfter(now, cfg.RescueInterval, tick)
		}
		if !now.Before(nextCleanup) {
			m.cleanup(ctx)
			nextCleanup = dueAfter(now, cfg.CleanupInterval, tick)
		}
	}
}

// dueAfter returns when work done at now, the loop's reading of the clock
// at a tick of period tick, is due again, interval later: half a tick
// early, so that it comes due at the tick nearest to now + interval. The
// ticks come at fixed times but the loop reads the clock a scheduling delay
// after each; a due time of now + interval fell just after the tick it
// meant whenever that tick's delay was the shorter (half the time), and the
// work waited one more tick.
func dueAfter(now time.Time, interval, tick time.Duration) time.Time {
	return now.Add(interval - tick/2)
}

// elect renews or seeks leadership every third of the term until ctx
// ends. A renewal that fails keeps the leadership until the term ends and
// is tried again sooner; only the store saying another client leads, or
// the term running out, hands it over.
func (m *Maintainer) elect(ctx context.Context) {
	ttl := m.term()
	defer m.leading.Store(false)
	var failing bool
	for {
		sentAt := time.Now()
		// A renewal may take until the term it renews ends; a client not
		// leading gives its try a third of the term.
		deadline := sentAt.Add(ttl / 3)
		if m.Leading() {
			deadline = time.Unix(0, m.termEnds.Load())
		}
		ectx, cancel := context.WithDeadline(ctx, deadline)
		ok, err := m.be.LeaderElect(ectx, &backend.LeaderElectParams{Name: LeaderName, ClientID: m.cfg.ClientID, TTL: ttl})
		cancel()
		wait := ttl / 3
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			wait = min(ttl/10, time.Second)
			if m.Leading() {
				left := time.Until(time.Unix(0, m.termEnds.Load()))
				m.logger.Warn("spool: could not renew maintenance leadership; still leading until the term ends, trying again", "term_left", left.Round(time.Millisecond), "retry_in", wait, "error", err)
			} else if m.leading.Swap(false) {
				m.logger.Warn("spool: maintenance leadership lost: its term ended before a renewal reached the store", "term", ttl, "error", err)
			} else if !failing {
				m.logger.Warn("spool: leader election failed; trying again", "retry_in", wait, "error", err)
			}
			failing = true
		default:
			if failing {
				m.logger.Info("spool: leader election reaches the store again")
			}
			failing = false
			if ok {
				m.termEnds.Store(sentAt.Add(ttl).UnixNano())
			}
			if was := m.leading.Swap(ok); was != ok {
				m.logger.Info("spool: maintenance leadership changed", "leader", ok)
				if ok {
					for _, c := range []chan struct{}{m.won, m.firerWon} {
						select {
						case c <- struct{}{}:
						default:
						}
					}
				}
			}
		}
		if m.Leading() {
			// Renew before the term ends even if the wait would pass it.
			wait = min(wait, time.Until(time.Unix(0, m.termEnds.Load()))/2)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Resign hands leadership over at once, so another client need not wait
// for the term to end; it waits at most 5 s.
func (m *Maintainer) Resign(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m.leading.Store(false)
	if err := m.be.LeaderResign(ctx, &backend.LeaderResignParams{Name: LeaderName, ClientID: m.cfg.ClientID}); err != nil {
		m.logger.Warn("spool: resign leadership", "error", err)
	}
}

func (m *Maintainer) rescue(ctx context.Context) {
	const batch = 1000
	for ctx.Err() == nil {
		res, err := m.be.JobRescue(ctx, &backend.JobRescueParams{Max: batch})
		if err != nil {
			if ctx.Err() == nil {
				m.logger.Warn("spool: rescue failed", "error", err)
			}
			return
		}
		if n := res.Retried + res.Discarded; n > 0 {
			m.logger.Info("spool: rescued jobs whose lease ended", "retried", res.Retried, "discarded", res.Discarded)
			if m.cfg.Rescued != nil {
				m.cfg.Rescued(res.Retried, res.Discarded)
			}
		}
		if res.Retried+res.Discarded < batch {
			return
		}
	}
}

func (m *Maintainer) cleanup(ctx context.Context) {
	cfg := &m.cfg
	age := func(d time.Duration) time.Duration { return max(d, 0) }
	p := &backend.JobCleanupParams{
		CompletedAge: age(cfg.CompletedRetention),
		DiscardedAge: age(cfg.DiscardedRetention),
		CancelledAge: age(cfg.CancelledRetention),
		Max:          10000,
	}
	for ctx.Err() == nil {
		began := time.Now()
		n, err := m.be.JobCleanup(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				m.logger.Warn("spool: cleanup failed", "error", err)
			}
			return
		}
		if n < p.Max {
			return
		}
		// A backlog is deleted at half speed at most: each full batch is
		// followed by a pause as long as it took, so that the hot path keeps
		// the database the other half of the time (back to back, deleting
		// beside a drain cost it a third of its rate: bench prune).
		t := time.NewTimer(time.Since(began))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
