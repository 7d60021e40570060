// Package periodic fires periodic jobs: while its client leads, it inserts
// one job per schedule slot. Exactly once per slot comes from the insert,
// not from here: each slot's job carries a unique key made of the periodic
// job's name and the slot's time, held in every state, so a slot fired
// twice (by a leader that was killed as it fired and by its successor, or
// by two clients that both believe they lead) makes one job.
//
// The leader records every periodic job it declares in the store
// (backend.PeriodicRecordParams): when it starts leading, after it fired a
// slot, and at least every RecordEvery. The first record of a name fixes
// its Since, and no slot before Since ever fires: a periodic job new to
// the store does not back-fill the window's slots from before it existed.
package periodic

import (
	"context"
	"log/slog"
	"time"

	"github.com/spoolq/spool/backend"
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
	// Describe and Queue are recorded in the store with the job.
	Describe string
	Queue    string
	// RunOnce fires the latest slot missed by more than the window once
	// (when the firer starts or becomes leader after a downtime), instead
	// of skipping it.
	RunOnce bool
	// RunOnStart fires one job when the firer starts leading, unless a
	// leader did so less than a window ago (FireStart).
	RunOnStart bool
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
	// FireStart inserts the run on start of job keyed by at, the StartedAt
	// the store holds (a duplicate is no error). An error leaves it to be
	// tried again.
	FireStart func(ctx context.Context, job *Job, at time.Time) error
	// Record records the jobs in the store and returns them as stored
	// (backend.Backend.PeriodicRecord).
	Record func(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error)
	// RecordEvery is the longest time between two records while leading
	// (a minute when zero): a record's SeenAt says its job is declared.
	RecordEvery time.Duration
	// MaxSleep bounds the wait between looks (so that a new leadership is
	// noticed); 1 s when zero.
	MaxSleep time.Duration
	Now      func() time.Time // time.Now when nil
}

// jobState is what the firer knows of one job since it last became
// leader.
type jobState struct {
	// done is the time up to which the job's slots are handled (fired, or
	// skipped as missed): zero when it has not looked yet.
	done time.Time
	// since is the job's stored Since: zero until recorded.
	since time.Time
	// start is the stored StartedAt of a run on start still to fire.
	start time.Time
	// fired is the latest slot fired and not recorded yet.
	fired time.Time
}

// Run fires slots until ctx ends.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) {
	if len(cfg.Jobs) == 0 {
		return
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = time.Second
	}
	if cfg.RecordEvery <= 0 {
		cfg.RecordEvery = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	states := make([]jobState, len(cfg.Jobs))
	var recorded time.Time // the last record since becoming leader
	for {
		now := cfg.Now()
		wait := cfg.MaxSleep
		if cfg.Leading() {
			if due(states, recorded, now, cfg.RecordEvery) {
				if err := record(ctx, &cfg, states, recorded.IsZero(), now); err != nil {
					if ctx.Err() == nil {
						logger.Warn("spool: could not record the periodic jobs in the store; trying again at the next look", "error", err)
					}
				} else {
					recorded = now
				}
			}
			for i := range cfg.Jobs {
				st := &states[i]
				if st.since.IsZero() {
					continue // not recorded since becoming leader: its Since is unknown
				}
				fireStart(ctx, &cfg, &cfg.Jobs[i], st, logger)
				st.done = fireDue(ctx, &cfg, &cfg.Jobs[i], st, now, logger)
				if next := cfg.Jobs[i].Schedule.Next(now); !next.IsZero() && next.Sub(now) < wait {
					wait = max(next.Sub(now), time.Millisecond)
				}
			}
		} else {
			clear(states)
			recorded = time.Time{}
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

// recordGap is the shortest time between two records made because slots
// fired: a job with a slot every few milliseconds costs a write a second.
const recordGap = time.Second

// due reports whether the jobs are to be recorded: when the firer has not
// recorded them since becoming leader, recorded them last every long ago,
// or fired a slot since the last record, made at least recordGap ago.
func due(states []jobState, recorded, now time.Time, every time.Duration) bool {
	if recorded.IsZero() || now.Sub(recorded) >= every {
		return true
	}
	if now.Sub(recorded) < recordGap {
		return false
	}
	for i := range states {
		if !states[i].fired.IsZero() {
			return true
		}
	}
	return false
}

// record records every job and takes its stored Since (and, on the first
// record since becoming leader, the StartedAt of a job that runs on start).
func record(ctx context.Context, cfg *Config, states []jobState, first bool, now time.Time) error {
	now = now.UTC().Truncate(time.Microsecond) // as the stores keep times
	p := &backend.PeriodicRecordParams{StartAfter: now.Add(-cfg.Window)}
	for i, j := range cfg.Jobs {
		rec := backend.PeriodicJob{Name: j.Name, Schedule: j.Describe, Queue: j.Queue, Since: now,
			LastSlot: states[i].fired, NextSlot: j.Schedule.Next(now)}
		if first && j.RunOnStart {
			rec.StartedAt = now
		}
		p.Jobs = append(p.Jobs, rec)
	}
	stored, err := cfg.Record(ctx, p)
	if err != nil {
		return err
	}
	for i := range states {
		if i >= len(stored) {
			break
		}
		states[i].since = stored[i].Since
		if first && cfg.Jobs[i].RunOnStart {
			states[i].start = stored[i].StartedAt
		}
		states[i].fired = time.Time{}
	}
	return nil
}

// fireStart fires job's run on start if one is pending. Every leader that
// starts within the window of the stored StartedAt fires it with that
// key, so that the run happens once even when the leader that stored it
// died before it fired.
func fireStart(ctx context.Context, cfg *Config, job *Job, st *jobState, logger *slog.Logger) {
	if st.start.IsZero() {
		return
	}
	if err := cfg.FireStart(ctx, job, st.start); err != nil {
		if ctx.Err() == nil {
			logger.Warn("spool: could not insert a periodic job's run on start; trying again at the next look",
				"periodic", job.Name, "started_at", st.start, "error", err)
		}
		return
	}
	st.start = time.Time{}
}

// fireDue fires the slots of job that are due at now and not handled yet
// (those after st.done, at most the window late, and not before st.since),
// and returns the time up to which every slot is handled: now, or the last
// slot fired before a failure, so that the next look tries the failed one
// again.
func fireDue(ctx context.Context, cfg *Config, job *Job, st *jobState, now time.Time, logger *slog.Logger) time.Time {
	done := st.done
	from := now.Add(-cfg.Window)
	// A slot at since fires: Next gives the slots strictly after from.
	if first := st.since.Add(-time.Nanosecond); first.After(from) {
		from = first
	}
	if done.IsZero() && job.RunOnce {
		// First look since becoming leader: a slot missed by more than the
		// window (a downtime), and not from before the job was recorded,
		// runs once.
		if last, ok := latestSlot(job.Schedule, now, cfg.Window); ok && !last.After(now.Add(-cfg.Window)) && !last.Before(st.since) {
			if err := cfg.Fire(ctx, job, last); err != nil {
				logFireError(ctx, logger, job, last, err)
				return done
			}
			st.fired = laterOf(st.fired, last)
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
		st.fired = laterOf(st.fired, slot)
	}
	// Every slot up to now is handled.
	return now
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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
