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
	// RunOnStart also inserts one job, to run at once, when a client starts
	// leading with this periodic job (Args gets the time it started),
	// unless a leader did so less than a window ago: clients starting
	// together, a rolling deploy or a failover make one run, not one per
	// leader. The job's unique key is made of Name and that start time.
	RunOnStart bool
}

// PeriodicRecord is a periodic job as the leader of a store's clients
// recorded it there (see Client.PeriodicRecords): what any process can
// list, with or without the PeriodicJobs config.
type PeriodicRecord = backend.PeriodicJob

// PeriodicRecordEvery is how often the leader records every periodic job of
// its config while it leads (and it does whenever it starts leading and
// after it fires a slot).
const PeriodicRecordEvery = time.Minute

// PeriodicStaleAfter is how long after its SeenAt a record counts as
// declared by no leader: no client that leads has it in its config (it was
// removed, or renamed), or no client leads.
const PeriodicStaleAfter = 5 * PeriodicRecordEvery

// PeriodicStale reports whether r was last seen more than
// PeriodicStaleAfter before now.
func PeriodicStale(r *PeriodicRecord, now time.Time) bool {
	return now.Sub(r.SeenAt) > PeriodicStaleAfter
}

// DescribeSchedule is the text that records a schedule: its String
// method's ("every 5m0s", "0 9 * * MON-FRI (Europe/Berlin)"), else its Go
// type.
func DescribeSchedule(s Schedule) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
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
			_, err := c.insertSlot(ctx, byName[j.Name], slot, false)
			return err
		},
		FireStart: func(ctx context.Context, j *periodic.Job, at time.Time) error {
			_, err := c.insertSlot(ctx, byName[j.Name], at, true)
			return err
		},
		Record: func(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
			return c.backend.PeriodicRecord(ctx, p)
		},
		RecordEvery: PeriodicRecordEvery,
	}
	for i := range jobs {
		j := &jobs[i]
		byName[j.Name] = j
		queue := DefaultQueue
		if j.Opts != nil && j.Opts.Queue != "" {
			queue = j.Opts.Queue
		}
		cfg.Jobs = append(cfg.Jobs, periodic.Job{Name: j.Name, Schedule: j.Schedule, Describe: DescribeSchedule(j.Schedule),
			Queue: queue, RunOnce: j.Missed == MissedRunOnce, RunOnStart: j.RunOnStart})
	}
	logger := c.config.Logger.With("spool_client", c.config.ClientID)
	return func(ctx context.Context) { periodic.Run(ctx, cfg, logger) }
}

// insertSlot inserts the job of one slot of p (or, when start is true, its
// run on start at slot), or finds the one inserted already.
func (c *Client) insertSlot(ctx context.Context, p *PeriodicJob, slot time.Time, start bool) (res *InsertResult, err error) {
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
	key := periodicKeyPrefix + p.Name + "@" + slot.UTC().Format(time.RFC3339Nano)
	if start {
		key = periodicKeyPrefix + p.Name + "@start:" + slot.UTC().Format(time.RFC3339Nano)
	}
	opts.Unique = &UniqueOpts{Key: key, States: backend.AllStates}
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
		if start {
			return nil, fmt.Errorf("periodic job %q, run on start at %s: %w", p.Name, slot.UTC().Format(time.RFC3339), err)
		}
		return nil, fmt.Errorf("periodic job %q, slot %s: %w", p.Name, slot.UTC().Format(time.RFC3339), err)
	}
	return res, nil
}
