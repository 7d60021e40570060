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
}

// Leading reports whether the last election made this client the leader.
// A leader that stalls past its term may still believe it leads; what it
// does as leader must be safe to do twice.
func (m *Maintainer) Leading() bool { return m.leading.Load() }

// New returns a maintainer over be.
func New(be backend.Backend, cfg Config, logger *slog.Logger) *Maintainer {
	return &Maintainer{be: be, cfg: cfg, logger: logger}
}

// Run takes part in the election until ctx ends, and while it leads,
// rescues and cleans up on their intervals.
func (m *Maintainer) Run(ctx context.Context) {
	cfg := &m.cfg
	ttl := max(cfg.LeaseDuration, 5*time.Second)
	tick := min(cfg.RescueInterval, ttl/3)
	t := time.NewTicker(tick)
	defer t.Stop()
	var (
		leader      bool
		nextElect   time.Time
		nextRescue  time.Time
		nextCleanup time.Time
	)
	for {
		now := time.Now()
		if !now.Before(nextElect) {
			ok, err := m.be.LeaderElect(ctx, &backend.LeaderElectParams{Name: LeaderName, ClientID: cfg.ClientID, TTL: ttl})
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				m.logger.Warn("spool: leader election failed", "error", err)
				leader = false
			case ok != leader:
				m.logger.Info("spool: maintenance leadership changed", "leader", ok)
				leader = ok
			}
			m.leading.Store(leader)
			nextElect = dueAfter(now, ttl/3, tick)
		}
		if leader && !now.Before(nextRescue) {
			m.rescue(ctx)
			nextRescue = dueAfter(now, cfg.RescueInterval, tick)
		}
		if leader && !now.Before(nextCleanup) {
			m.cleanup(ctx)
			nextCleanup = dueAfter(now, cfg.CleanupInterval, tick)
		}
		select {
		case <-ctx.Done():
			m.leading.Store(false)
			return
		case <-t.C:
		}
	}
}

// dueAfter returns when work done at now, the loop's reading of the clock
// at a tick of period tick, is due again, interval later: half a tick
// early, so that it comes due at the tick nearest to now + interval. The
// ticks come at fixed times but the loop reads the clock a scheduling delay
// after each; a due time of now + interval fell just after the tick it
// meant whenever that tick's delay was the shorter (half the time), and the
// work waited one more tick: rescue at a 1 s interval ran every 1 or 2 s.
func dueAfter(now time.Time, interval, tick time.Duration) time.Time {
	return now.Add(interval - tick/2)
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
