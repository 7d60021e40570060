package spool

import (
	"fmt"
	"time"
)

// checkPeriodicKinds refuses a periodic job that this client could not
// insert: a client with Workers inserts only the kinds it has a worker for
// (unless AllowUnknownKinds), so such a job would fail at every slot, in
// the leader's log only. A client without Workers cannot Start, and so
// never fires its periodic jobs (it lists them, for a dashboard): nothing
// is checked there. The kind is read from the job's Args for its next slot
// after now, as the leader would build it. An Args that panics or returns
// nil there tells no kind; the leader reports it at each slot, as it does
// for any slot whose Args fails.
func checkPeriodicKinds(c Config, now time.Time) error {
	if c.Workers == nil || c.AllowUnknownKinds {
		return nil
	}
	for _, p := range c.PeriodicJobs {
		slot := p.Schedule.Next(now)
		if slot.IsZero() {
			continue // no slot left: the job never fires
		}
		kind, ok := periodicKind(&p, slot)
		if ok && !c.Workers.has(kind) {
			return fmt.Errorf("%w: periodic job %q inserts kind %q, which has no worker in Config.Workers (%w): "+
				"register one with spool.AddWorker, or set Config.AllowUnknownKinds if another process works it",
				ErrInvalidConfig, p.Name, kind, ErrUnknownKind)
		}
	}
	return nil
}

// periodicKind calls p's Args for slot and returns the kind of its args;
// false when Args panics or returns nil.
func periodicKind(p *PeriodicJob, slot time.Time) (kind string, ok bool) {
	defer func() {
		if recover() != nil { // Args is the user's code
			kind, ok = "", false
		}
	}()
	args := p.Args(slot)
	if args == nil {
		return "", false
	}
	return args.Kind(), true
}
