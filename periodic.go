package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/periodic"
)

// Schedule gives a periodic job's slots: Next returns the first slot
// strictly after t (the zero time when there is none). Every gives fixed
// intervals; the module github.com/spoolq/spool/cron parses cron
// expressions in a time zone.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every returns a schedule with a slot every d, at whole multiples of d
// counted from the Unix epoch, so that every client agrees on the slots
// (Every(time.Hour) fires on the hour, UTC). d must be positive.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

// String names the interval: "every 5m0s".
func (e every) String() string { return "every " + time.Duration(e).String() }

func (e every) Next(t time.Time) time.Time {
	d := int64(e)
	if d <= 0 {
		return time.Time{}
	}
	n := t.UnixNano()
	slot := n - n%d
	if n < 0 && n%d != 0 {
		slot -= d
	}
	return time.Unix(0, slot+d).UTC()
}

// MissedPolicy says what happens to a periodic job's slots that passed
// while no client led (all clients down, or a failover longer than the
// window; see PeriodicJob).
type MissedPolicy uint8

const (
	// MissedSkip skips them: the job next runs at its next slot.
	MissedSkip MissedPolicy = iota
	// MissedRunOnce runs the latest of them once, when a client next leads.
	MissedRunOnce
)

// PeriodicJob is a job inserted on a schedule. The elected leader among
// the clients of a store inserts one job per slot, with RunAt set to the
// slot. Each slot's job has a unique key made of Name and the slot, held in
// every state, so a slot fires exactly once even when the leader is killed
// as it fires or two clients both believe they lead. A slot is fired while
// it is at most a window late: a minute, or two leader terms
// (LeaseDuration, at least 5 s) if longer. That covers a leader's failover.
// Slots missed by more than that follow Missed.
type PeriodicJob struct {
	// Name identifies the periodic job across clients and restarts: 1 to
	// 128 printable characters, unique within a Config.
	Name string
	// Schedule gives the slots.
	Schedule Schedule
	// Args builds the job's args for a slot. NewClient also calls it once,
	// for the next slot, to check that the client works the job's kind
	// (see Config.PeriodicJobs).
	Args func(slot time.Time) JobArgs
	// Opts are the job's insert options (queue, priority, …). RunAt and
	// Unique are set by the scheduler; metadata gains the key
	// "spool_periodic" with Name.
	Opts *InsertOpts
	// Missed says what happens to slots missed by more than the window.
	Missed MissedPolicy
}

// periodicKeyPrefix starts the unique key of a periodic job's slot.
const periodicKeyPrefix = "spool-periodic:"

// checkPeriodic validates the periodic jobs of a config.
func checkPeriodic(jobs []PeriodicJob) error {
	names := map[string]bool{}
	for i, j := range jobs {
		switch {
		case j.Name == "" || utf8.RuneCountInString(j.Name) > 128 || !printable(j.Name) || !utf8.ValidString(j.Name):
			return fmt.Errorf("periodic job %d: name %q must be 1 to 128 printable characters", i, j.Name)
		case names[j.Name]:
			return fmt.Errorf("periodic job %q is configured twice", j.Name)
		case j.Schedule == nil:
			return fmt.Errorf("periodic job %q has no schedule", j.Name)
		case j.Args == nil:
			return fmt.Errorf("periodic job %q has no Args function", j.Name)
		case j.Missed > MissedRunOnce:
			return fmt.Errorf("periodic job %q: unknown missed policy %d", j.Name, j.Missed)
		}
		if e, ok := j.Schedule.(every); ok && e <= 0 {
			return fmt.Errorf("periodic job %q: Every(%s) needs a positive interval", j.Name, time.Duration(e))
		}
		names[j.Name] = true
	}
	return nil
}

// periodicService returns the engine service that fires c's periodic jobs
// while leading says this client leads; nil when there are none.
func (c *Client) periodicService(leading func() bool) func(context.Context) {
	jobs := c.config.PeriodicJobs
	if len(jobs) == 0 {
		return nil
	}
	byName := make(map[string]*PeriodicJob, len(jobs))
	cfg := periodic.Config{
		Window:  max(time.Minute, 2*max(c.config.LeaseDuration, 5*time.Second)),
		Leading: leading,
		Fire: func(ctx context.Context, j *periodic.Job, slot time.Time) error {
			_, err := c.insertSlot(ctx, byName[j.Name], slot)
			return err
		},
	}
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
		cfg.Jobs = append(cfg.Jobs, periodic.Job{Name: jobs[i].Name, Schedule: jobs[i].Schedule, RunOnce: jobs[i].Missed == MissedRunOnce})
	}
	logger := c.config.Logger.With("spool_client", c.config.ClientID)
	return func(ctx context.Context) { periodic.Run(ctx, cfg, logger) }
}

// insertSlot inserts the job of one slot of p, or finds the one inserted
// already.
func (c *Client) insertSlot(ctx context.Context, p *PeriodicJob, slot time.Time) (res *InsertResult, err error) {
	defer func() {
		// Args is the user's code: a panic there must not end the service.
		if v := recover(); v != nil {
			err = fmt.Errorf("periodic job %q: Args panicked: %v", p.Name, v)
		}
	}()
	var opts InsertOpts
	if p.Opts != nil {
		opts = *p.Opts
	}
	opts.RunAt, opts.Delay = slot, 0
	opts.Unique = &UniqueOpts{Key: periodicKeyPrefix + p.Name + "@" + slot.UTC().Format(time.RFC3339Nano), States: backend.AllStates}
	meta := map[string]any{}
	if len(opts.Metadata) > 0 {
		if err := json.Unmarshal(opts.Metadata, &meta); err != nil || meta == nil {
			return nil, fmt.Errorf("periodic job %q: metadata must be a JSON object", p.Name)
		}
	}
	meta["spool_periodic"] = p.Name
	if opts.Metadata, err = json.Marshal(meta); err != nil {
		return nil, fmt.Errorf("periodic job %q: encode metadata: %w", p.Name, err)
	}
	res, err = c.Insert(ctx, p.Args(slot), &opts)
	if err != nil {
		return nil, fmt.Errorf("periodic job %q, slot %s: %w", p.Name, slot.UTC().Format(time.RFC3339), err)
	}
	return res, nil
}
