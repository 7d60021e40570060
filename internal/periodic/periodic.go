// Package periodic fires periodic jobs: while its client leads, it inserts
// one job per schedule slot. Exactly once per slot comes from the insert,
// not from here: each slot's job carries a unique key made of the periodic
// job's name and the slot's time, held in every state, so a slot fired
// twice (by a leader that was killed as it fired and by its successor, or
// by two clients that both believe they lead) makes one job.
package periodic

import (
	"context"
	"log/slog"
	"time"
)

// Schedule gives a periodic job's slots: Next returns the first slot
// strictly after t.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Job is one periodic job as the firer sees it.
type Job struct {
	Name     string
	Schedule Schedule
	// RunOnce fires the latest slot missed by more than the window once
	// (when the firer starts or becomes leader after a downtime), instead
	// of skipping it.
	RunOnce bool
}

// Config is what the firer runs with.
type Config struct {
	Jobs []Job
	// Window is how late a slot may still be fired as on time. It covers a
	// leader's failover: a slot that came due while no client led is fired
	// by the next leader if it takes over within Window.
	Window time.Duration
	// Leading reports whether this client leads.
	Leading func() bool
	// Fire inserts the job of one slot (a duplicate of one already
	// inserted is no error). An error leaves the slot to be tried again.
	Fire func(ctx context.Context, job *Job, slot time.Time) error
	// MaxSleep bounds the wait between looks (so that a new leadership is
	// noticed); 1 s when zero.
	MaxSleep time.Duration
	Now      func() time.Time // time.Now when nil
}

// Run fires slots until ctx ends.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) {
	if len(cfg.Jobs) == 0 {
		return
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// done[i] is the time up to which job i's slots are handled (fired, or
	// skipped as missed) since this firer last became leader: zero when it
	// has not looked yet.
	done := make([]time.Time, len(cfg.Jobs))
	for {
		now := cfg.Now()
		wait := cfg.MaxSleep
		if cfg.Leading() {
			for i := range cfg.Jobs {
				done[i] = fireDue(ctx, &cfg, &cfg.Jobs[i], done[i], now, logger)
				if next := cfg.Jobs[i].Schedule.Next(now); !next.IsZero() && next.Sub(now) < wait {
					wait = max(next.Sub(now), time.Millisecond)
				}
			}
		} else {
			clear(done)
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

// fireDue fires the slots of job that are due at now and not handled yet
// (those after done, and at most the window late), and returns the time up
// to which every slot is handled: now, or the last slot fired before a
// failure, so that the next look tries the failed one again.
func fireDue(ctx context.Context, cfg *Config, job *Job, done, now time.Time, logger *slog.Logger) time.Time {
	from := now.Add(-cfg.Window)
	if done.IsZero() && job.RunOnce {
		// First look since becoming leader: a slot missed by more than the
		// window (a downtime) runs once.
		if last, ok := latestSlot(job.Schedule, now, cfg.Window); ok && !last.After(from) {
			if err := cfg.Fire(ctx, job, last); err != nil {
				logFireError(ctx, logger, job, last, err)
				return done
			}
			logger.Info("spool: periodic job's missed slot run once", "periodic", job.Name, "slot", last)
		}
	}
	if done.After(from) {
		from = done
	}
	for slot := job.Schedule.Next(from); !slot.IsZero() && !slot.After(now); slot = job.Schedule.Next(slot) {
		if err := cfg.Fire(ctx, job, slot); err != nil {
			logFireError(ctx, logger, job, slot, err)
			return done
		}
		done = slot
	}
	// Every slot up to now is handled.
	return now
}

func logFireError(ctx context.Context, logger *slog.Logger, job *Job, slot time.Time, err error) {
	if ctx.Err() != nil {
		return
	}
	logger.Warn("spool: could not insert a periodic job; trying again while the slot is within the window",
		"periodic", job.Name, "slot", slot, "error", err)
}

// latestSlot returns the latest slot at or before now, looking back at
// most a year: it walks Next from a start that doubles back from the
// window until a slot is found.
func latestSlot(s Schedule, now time.Time, window time.Duration) (time.Time, bool) {
	back := max(window, time.Minute)
	for back <= 366*24*time.Hour {
		slot := s.Next(now.Add(-back))
		if !slot.IsZero() && !slot.After(now) {
			for next := s.Next(slot); !next.IsZero() && !next.After(now); next = s.Next(next) {
				slot = next
			}
			return slot, true
		}
		back *= 2
	}
	return time.Time{}, false
}
