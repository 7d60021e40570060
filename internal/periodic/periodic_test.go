package periodic

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
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
	done := fireDue(context.Background(), cfg, job, time.Time{}, base.Add(time.Second), quiet)
	// (base-59s, base+1s]: the slots base-50s … base.
	if len(f.fired) != 6 || !f.fired[0].Equal(base.Add(-50*time.Second)) || !f.fired[5].Equal(base) || !done.Equal(base.Add(time.Second)) {
		t.Fatalf("first look fired %v (done %v), want the 6 slots of the last minute up to %v", f.fired, done, base)
	}
	done = fireDue(context.Background(), cfg, job, done, base.Add(5*time.Second), quiet)
	if len(f.fired) != 6 {
		t.Fatalf("a look before the next slot fired %v", f.fired[6:])
	}
	done = fireDue(context.Background(), cfg, job, done, base.Add(21*time.Second), quiet)
	if len(f.fired) != 8 || !f.fired[7].Equal(base.Add(20*time.Second)) || !done.Equal(base.Add(21*time.Second)) {
		t.Fatalf("after 21 s: fired %v, done %v; want base+10s and base+20s", f.fired[6:], done)
	}
}

func TestFailedFireIsRetried(t *testing.T) {
	f := &firer{fail: true}
	cfg := f.config(time.Minute)
	job := &Job{Name: "j", Schedule: interval(10 * time.Second)}
	done := base.Add(-time.Second)
	done2 := fireDue(context.Background(), cfg, job, done, base.Add(time.Second), quiet)
	if !done2.Equal(done) {
		t.Fatalf("a failed fire moved done to %v", done2)
	}
	f.fail = false
	fireDue(context.Background(), cfg, job, done2, base.Add(2*time.Second), quiet)
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
		fireDue(context.Background(), f.config(time.Minute), job, time.Time{}, noon, quiet)
		if len(f.fired) != tc.want {
			t.Fatalf("RunOnce %v: fired %v, want %d", tc.runOnce, f.fired, tc.want)
		}
		if tc.want == 1 && !f.fired[0].Equal(noon.Truncate(24*time.Hour)) {
			t.Fatalf("RunOnce fired %v, want the last midnight", f.fired[0])
		}
		// Later looks in the same leadership do not fire it again.
		fireDue(context.Background(), f.config(time.Minute), job, noon.Add(-time.Minute), noon.Add(time.Hour), quiet)
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
