package periodic

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// interval is a schedule with a slot every d since the Unix epoch.
type interval time.Duration

func (i interval) Next(t time.Time) time.Time {
	d := time.Duration(i)
	return t.Truncate(d).Add(d)
}

type firer struct {
	fired []time.Time
	fail  bool
}

func (f *firer) config(window time.Duration) *Config {
	return &Config{Window: window, Fire: func(_ context.Context, _ *Job, slot time.Time) error {
		if f.fail {
			return errors.New("database down")
		}
		f.fired = append(f.fired, slot)
		return nil
	}}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// base is a time on a slot of every schedule below.
var base = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

func TestWindowSlotsFireOnceEach(t *testing.T) {
	f := &firer{}
	cfg := f.config(time.Minute)
	job := &Job{Name: "j", Schedule: interval(10 * time.Second)}
	done := fireDue(context.Background(), cfg, job, &jobState{}, base.Add(time.Second), quiet)
	// (base-59s, base+1s]: the slots base-50s … base.
	if len(f.fired) != 6 || !f.fired[0].Equal(base.Add(-50*time.Second)) || !f.fired[5].Equal(base) || !done.Equal(base.Add(time.Second)) {
		t.Fatalf("first look fired %v (done %v), want the 6 slots of the last minute up to %v", f.fired, done, base)
	}
	done = fireDue(context.Background(), cfg, job, &jobState{done: done}, base.Add(5*time.Second), quiet)
	if len(f.fired) != 6 {
		t.Fatalf("a look before the next slot fired %v", f.fired[6:])
	}
	done = fireDue(context.Background(), cfg, job, &jobState{done: done}, base.Add(21*time.Second), quiet)
	if len(f.fired) != 8 || !f.fired[7].Equal(base.Add(20*time.Second)) || !done.Equal(base.Add(21*time.Second)) {
		t.Fatalf("after 21 s: fired %v, done %v; want base+10s and base+20s", f.fired[6:], done)
	}
}

func TestFailedFireIsRetried(t *testing.T) {
	f := &firer{fail: true}
	cfg := f.config(time.Minute)
	job := &Job{Name: "j", Schedule: interval(10 * time.Second)}
	done := base.Add(-time.Second)
	done2 := fireDue(context.Background(), cfg, job, &jobState{done: done}, base.Add(time.Second), quiet)
	if !done2.Equal(done) {
		t.Fatalf("a failed fire moved done to %v", done2)
	}
	f.fail = false
	fireDue(context.Background(), cfg, job, &jobState{done: done2}, base.Add(2*time.Second), quiet)
	if len(f.fired) != 1 || !f.fired[0].Equal(base) {
		t.Fatalf("retry fired %v, want %v", f.fired, base)
	}
}

func TestMissedSlots(t *testing.T) {
	daily := interval(24 * time.Hour)
	noon := base // slots at midnight UTC: noon is 12 h past the last one
	for _, tc := range []struct {
		runOnce bool
		want    int
	}{{false, 0}, {true, 1}} {
		f := &firer{}
		job := &Job{Name: "d", Schedule: daily, RunOnce: tc.runOnce}
		fireDue(context.Background(), f.config(time.Minute), job, &jobState{}, noon, quiet)
		if len(f.fired) != tc.want {
			t.Fatalf("RunOnce %v: fired %v, want %d", tc.runOnce, f.fired, tc.want)
		}
		if tc.want == 1 && !f.fired[0].Equal(noon.Truncate(24*time.Hour)) {
			t.Fatalf("RunOnce fired %v, want the last midnight", f.fired[0])
		}
		// Later looks in the same leadership do not fire it again.
		fireDue(context.Background(), f.config(time.Minute), job, &jobState{done: noon.Add(-time.Minute)}, noon.Add(time.Hour), quiet)
		if len(f.fired) != tc.want {
			t.Fatalf("RunOnce %v: a later look fired %v", tc.runOnce, f.fired)
		}
	}
}

func TestRunFiresOnlyWhileLeading(t *testing.T) {
	var leading atomic.Bool
	fired := make(chan time.Time, 100)
	cfg := Config{
		Jobs:     []Job{{Name: "j", Schedule: interval(20 * time.Millisecond)}},
		Window:   time.Second, // a late wake-up still fires the slots it missed
		Leading:  leading.Load,
		MaxSleep: 5 * time.Millisecond,
		Fire: func(_ context.Context, _ *Job, slot time.Time) error {
			fired <- slot
			return nil
		},
		Record: memory.New().PeriodicRecord,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, cfg, quiet); close(done) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if len(fired) != 0 {
		t.Fatalf("fired %d slots while not leading", len(fired))
	}
	leading.Store(true)
	ctx, cancel = context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { Run(ctx, cfg, quiet); close(done) }()
	var prev time.Time
	for range 5 {
		select {
		case slot := <-fired:
			if !prev.IsZero() && slot.Sub(prev) != 20*time.Millisecond {
				t.Fatalf("slot %v after %v, want consecutive slots", slot, prev)
			}
			prev = slot
		case <-time.After(5 * time.Second):
			t.Fatal("no slot fired while leading")
		}
	}
	cancel()
	<-done
}

// leader is one firer's view of a store, driven look by look on a clock of
// the test's.
type leader struct {
	cfg    Config
	f      *firer
	starts []time.Time
	states []jobState
}

func newLeader(be backend.Backend, window time.Duration, jobs ...Job) *leader {
	l := &leader{f: &firer{}, states: make([]jobState, len(jobs))}
	l.cfg = *l.f.config(window)
	l.cfg.Jobs = jobs
	l.cfg.Record = be.PeriodicRecord
	l.cfg.FireStart = func(_ context.Context, _ *Job, at time.Time) error {
		l.starts = append(l.starts, at)
		return nil
	}
	return l
}

// look is one look of Run at now: a record (the first since leading when
// first), then each job's run on start and due slots.
func (l *leader) look(t *testing.T, first bool, now time.Time) {
	t.Helper()
	if err := record(context.Background(), &l.cfg, l.states, first, now); err != nil {
		t.Fatal(err)
	}
	for i := range l.cfg.Jobs {
		fireStart(context.Background(), &l.cfg, &l.cfg.Jobs[i], &l.states[i], quiet)
		l.states[i].done = fireDue(context.Background(), &l.cfg, &l.cfg.Jobs[i], &l.states[i], now, quiet)
	}
}

// TestNewJobDoesNotBackFill: a periodic job that the store has never
// recorded fires only the slots from its first record on (the slot of that
// very instant included), not the window's slots before it; once recorded,
// a later leader fires the slots it missed within the window.
func TestNewJobDoesNotBackFill(t *testing.T) {
	be := memory.New()
	job := Job{Name: "j", Schedule: interval(time.Second), Describe: "every 1s", Queue: "q"}
	l := newLeader(be, time.Minute, job)
	l.look(t, true, base.Add(300*time.Millisecond))
	if len(l.f.fired) != 0 {
		t.Fatalf("first sighting fired %v, want nothing from before %v", l.f.fired, base.Add(300*time.Millisecond))
	}
	l.look(t, false, base.Add(2*time.Second))
	if len(l.f.fired) != 2 || !l.f.fired[0].Equal(base.Add(time.Second)) {
		t.Fatalf("after 2 s fired %v, want base+1s and base+2s", l.f.fired)
	}

	// A job first seen on one of its slots fires that slot.
	onSlot := newLeader(be, time.Minute, Job{Name: "on-slot", Schedule: interval(time.Second)})
	onSlot.look(t, true, base)
	if len(onSlot.f.fired) != 1 || !onSlot.f.fired[0].Equal(base) {
		t.Fatalf("first sighting on a slot fired %v, want that slot alone", onSlot.f.fired)
	}

	// Every client stops for 30 s; the next leader fires the window's slots
	// (the two fired already again: their keys make them no new jobs), not
	// those from before the job existed.
	next := newLeader(be, time.Minute, job)
	next.look(t, true, base.Add(32*time.Second))
	if len(next.f.fired) != 32 || !next.f.fired[0].Equal(base.Add(time.Second)) || !next.f.fired[31].Equal(base.Add(32*time.Second)) {
		t.Fatalf("after a downtime fired %d slots (%v … ), want the 32 from base+1s to base+32s", len(next.f.fired), next.f.fired[:min(3, len(next.f.fired))])
	}
	recs, err := be.PeriodicList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Name != "j" || !recs[0].Since.Equal(base.Add(300*time.Millisecond)) || recs[0].Schedule != "every 1s" || recs[0].Queue != "q" {
		t.Fatalf("records %+v, want j since its first sighting", recs)
	}
	next.look(t, false, base.Add(33*time.Second))
	recs, _ = be.PeriodicList(context.Background())
	if !recs[0].LastSlot.Equal(base.Add(32*time.Second)) || !recs[0].NextSlot.Equal(base.Add(34*time.Second)) {
		t.Fatalf("record after a look at base+33s: last %v next %v, want base+32s (recorded at this look) and base+34s", recs[0].LastSlot, recs[0].NextSlot)
	}
}

// TestNewJobRunOnceSkipsSlotsBeforeIt: MissedRunOnce does not run a slot
// from before the job was first recorded, and runs the latest missed one
// once the job was known before it.
func TestNewJobRunOnceSkipsSlotsBeforeIt(t *testing.T) {
	be := memory.New()
	job := Job{Name: "d", Schedule: interval(24 * time.Hour), RunOnce: true}
	first := newLeader(be, time.Minute, job)
	first.look(t, true, base) // noon: the last slot was midnight, before the job existed
	if len(first.f.fired) != 0 {
		t.Fatalf("a new job's RunOnce fired %v", first.f.fired)
	}
	later := newLeader(be, time.Minute, job)
	later.look(t, true, base.Add(2*24*time.Hour)) // two days of downtime
	if len(later.f.fired) != 1 || !later.f.fired[0].Equal(base.Add(36*time.Hour)) {
		t.Fatalf("after two days fired %v, want the last midnight once", later.f.fired)
	}
}

// TestRunOnStartOncePerWindow: leaders that start within a window of each
// other (two clients starting together, a rolling deploy) fire one run on
// start, with one key; a leader that starts later fires a new one; a job
// without RunOnStart fires none.
func TestRunOnStartOncePerWindow(t *testing.T) {
	be := memory.New()
	job := Job{Name: "s", Schedule: interval(time.Hour), RunOnStart: true}
	plain := Job{Name: "p", Schedule: interval(time.Hour)}
	a, b := newLeader(be, time.Minute, job, plain), newLeader(be, time.Minute, job, plain)
	a.look(t, true, base.Add(time.Second))
	b.look(t, true, base.Add(3*time.Second))
	if len(a.starts) != 1 || len(b.starts) != 1 || !a.starts[0].Equal(b.starts[0]) || !a.starts[0].Equal(base.Add(time.Second)) {
		t.Fatalf("two leaders starting 2 s apart fired runs on start %v and %v, want one key: the first's start", a.starts, b.starts)
	}
	a.look(t, false, base.Add(30*time.Second))
	if len(a.starts) != 1 {
		t.Fatalf("a later look of the same leadership fired %v", a.starts)
	}
	c := newLeader(be, time.Minute, job, plain)
	c.look(t, true, base.Add(2*time.Minute))
	if len(c.starts) != 1 || !c.starts[0].Equal(base.Add(2*time.Minute)) {
		t.Fatalf("a leader starting after the window fired %v, want a new run at its start", c.starts)
	}
	recs, err := be.PeriodicList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Name != "p" || !recs[0].StartedAt.IsZero() || !recs[1].StartedAt.Equal(base.Add(2*time.Minute)) {
		t.Fatalf("records %+v: want p never started and s started at the last start", recs)
	}
}

// TestRunOnStartRetriedAfterFailure: a run on start whose insert failed is
// fired at the next look, with the same key.
func TestRunOnStartRetriedAfterFailure(t *testing.T) {
	l := newLeader(memory.New(), time.Minute, Job{Name: "s", Schedule: interval(time.Hour), RunOnStart: true})
	fail := true
	l.cfg.FireStart = func(_ context.Context, _ *Job, at time.Time) error {
		if fail {
			return errors.New("database down")
		}
		l.starts = append(l.starts, at)
		return nil
	}
	l.look(t, true, base.Add(time.Second))
	fail = false
	l.look(t, false, base.Add(2*time.Second))
	if len(l.starts) != 1 || !l.starts[0].Equal(base.Add(time.Second)) {
		t.Fatalf("after a failure fired %v, want the run keyed by the first start", l.starts)
	}
}

// TestNothingFiresUnrecorded: while the store cannot record the jobs, the
// firer fires nothing, since it cannot tell a new job from a known one.
func TestNothingFiresUnrecorded(t *testing.T) {
	be := memory.New()
	_ = be.Close() // every call fails
	fired := make(chan time.Time, 10)
	var looks atomic.Int32
	tried := make(chan struct{})
	cfg := Config{
		Jobs:     []Job{{Name: "j", Schedule: interval(time.Millisecond)}},
		Window:   time.Minute,
		Leading:  func() bool { return true },
		MaxSleep: time.Millisecond,
		Fire: func(_ context.Context, _ *Job, slot time.Time) error {
			fired <- slot
			return nil
		},
		Record: func(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
			if looks.Add(1) == 20 {
				close(tried)
			}
			return be.PeriodicRecord(ctx, p)
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, cfg, quiet); close(done) }()
	<-tried
	cancel()
	<-done
	if len(fired) != 0 {
		t.Fatalf("fired %d slots with no record", len(fired))
	}
}

// TestRecordDue: the firer records at its first look as leader, a minute
// after the last record, and after it fired a slot, but not twice within
// recordGap for fired slots.
func TestRecordDue(t *testing.T) {
	fired := []jobState{{fired: base}}
	quietJobs := []jobState{{}}
	for _, tc := range []struct {
		states   []jobState
		recorded time.Time
		want     bool
	}{
		{quietJobs, time.Time{}, true},
		{quietJobs, base.Add(-30 * time.Second), false},
		{quietJobs, base.Add(-time.Minute), true},
		{fired, base.Add(-recordGap / 2), false},
		{fired, base.Add(-recordGap), true},
	} {
		if got := due(tc.states, tc.recorded, base, time.Minute); got != tc.want {
			t.Errorf("due(fired %v, recorded %v before) = %v, want %v", tc.states[0].fired, base.Sub(tc.recorded), got, tc.want)
		}
	}
}
