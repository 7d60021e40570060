package spool_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

type periodicArgs struct {
	Slot time.Time `json:"slot"`
}

func (periodicArgs) Kind() string { return "periodic_test" }

// TestPeriodicJobs: a started client inserts one job per slot of its
// periodic job, on the slot, with the job's name in metadata and the
// options given; a job whose Args panics is logged and does not stop the
// others; bad periodic configurations are refused.
func TestPeriodicJobs(t *testing.T) {
	ctx := context.Background()
	ws := spool.NewWorkers()
	ran := make(chan time.Time, 100)
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[periodicArgs]) error {
		ran <- j.Args.Slot
		return nil
	}))
	be := memory.New()
	slot := 50 * time.Millisecond
	c, err := spool.NewClient(be, &spool.Config{
		Workers: ws,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4}, "cron": {MaxWorkers: 4}},
		Logger:  conformance.TestLogger(t, slog.LevelWarn),
		PeriodicJobs: []spool.PeriodicJob{
			{
				Name:     "every-50ms",
				Schedule: spool.Every(slot),
				Args:     func(s time.Time) spool.JobArgs { return periodicArgs{Slot: s} },
				Opts:     &spool.InsertOpts{Queue: "cron", Priority: 3, Metadata: json.RawMessage(`{"team":"ops"}`)},
			},
			{
				Name:     "panics",
				Schedule: spool.Every(slot),
				Args:     func(time.Time) spool.JobArgs { panic("no args today") },
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Truncate(time.Microsecond)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	for range 6 {
		select {
		case s := <-ran:
			if s.UnixNano()%int64(slot) != 0 {
				t.Fatalf("job for %v: not on a slot", s)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no periodic job ran within 10 s")
		}
	}
	jobs, err := c.JobList(ctx, &spool.JobListParams{Kind: "periodic_test", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Time]bool{}
	for _, j := range jobs {
		if seen[j.RunAt] {
			t.Fatalf("slot %v has two jobs", j.RunAt)
		}
		seen[j.RunAt] = true
		if j.RunAt.Before(started) {
			t.Fatalf("job %d for slot %v: back-filled from before the periodic job first started (%v)", j.ID, j.RunAt, started)
		}
		var meta map[string]string
		if err := json.Unmarshal(j.Metadata, &meta); err != nil || meta["spool_periodic"] != "every-50ms" || meta["team"] != "ops" {
			t.Fatalf("job %d metadata %s", j.ID, j.Metadata)
		}
		if j.Queue != "cron" || j.Priority != 3 || j.UniqueKey == "" {
			t.Fatalf("job %d: queue %s priority %d key %q, want the job's options and a unique key", j.ID, j.Queue, j.Priority, j.UniqueKey)
		}
	}

	// The leader records the slots it fired at most once a second.
	var recs []spool.PeriodicRecord
	for deadline := time.Now().Add(15 * time.Second); ; {
		if recs, err = c.PeriodicRecords(ctx); err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 && !recs[0].LastSlot.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records %+v: no fired slot recorded within 15 s", recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(recs) != 2 || recs[0].Name != "every-50ms" || recs[0].Schedule != "every 50ms" || recs[0].Queue != "cron" ||
		recs[0].Since.Before(started) || recs[0].LastSlot.Before(recs[0].Since) || recs[1].Name != "panics" || recs[1].Queue != spool.DefaultQueue {
		t.Fatalf("records %+v, want both periodic jobs with schedule, queue and slots", recs)
	}

	args := func(time.Time) spool.JobArgs { return periodicArgs{} }
	for _, bad := range [][]spool.PeriodicJob{
		{{Name: "", Schedule: spool.Every(time.Second), Args: args}},
		{{Name: "a", Schedule: spool.Every(time.Second), Args: args}, {Name: "a", Schedule: spool.Every(time.Minute), Args: args}},
		{{Name: "a", Args: args}},
		{{Name: "a", Schedule: spool.Every(0), Args: args}},
		{{Name: "a", Schedule: spool.Every(time.Second)}},
		{{Name: "a", Schedule: spool.Every(time.Second), Args: args, Missed: 7}},
	} {
		if _, err := spool.NewClient(be, &spool.Config{PeriodicJobs: bad}); !errors.Is(err, spool.ErrInvalidConfig) {
			t.Errorf("periodic %+v: %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestEvery(t *testing.T) {
	s := spool.Every(time.Hour)
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3*3600))
	if got, want := s.Next(at), time.Date(2030, 5, 6, 5, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Every(1h).Next(%v) = %v, want %v (on the hour, UTC)", at, got, want)
	}
	if got := s.Next(time.Date(2030, 5, 6, 5, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2030, 5, 6, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("Next of a slot = %v, want the one after", got)
	}
}

type startArgs struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

func (startArgs) Kind() string { return "periodic_start_test" }

// TestPeriodicRunOnStartOnce: a periodic job with RunOnStart runs once when
// a client starts leading with it; when a second client takes over the
// leadership within the window (a rolling deploy), it does not run again.
// The second client's other periodic job, new to the store, runs on start
// after the first one's was fired again, which tells the test it was.
func TestPeriodicRunOnStartOnce(t *testing.T) {
	ctx := context.Background()
	ran := make(chan startArgs, 10)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[startArgs]) error {
		ran <- j.Args
		return nil
	}))
	job := func(name string) spool.PeriodicJob {
		return spool.PeriodicJob{Name: name, Schedule: spool.Every(24 * time.Hour), RunOnStart: true,
			Args: func(at time.Time) spool.JobArgs { return startArgs{Name: name, At: at} }}
	}
	newClient := func(be *memory.Backend, id string, jobs ...spool.PeriodicJob) *spool.Client {
		c, err := spool.NewClient(be, &spool.Config{ClientID: id, Workers: ws, Logger: conformance.TestLogger(t, slog.LevelWarn),
			Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}}, PeriodicJobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	next := func(what string) startArgs {
		t.Helper()
		select {
		case a := <-ran:
			return a
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s within 30 s", what)
		}
		return startArgs{}
	}
	be := memory.New()
	a := newClient(be, "a", job("report"))
	first := next("run on start")
	if first.Name != "report" {
		t.Fatalf("ran %+v, want report's run on start", first)
	}
	b := newClient(be.Reopen(), "b", job("report"), job("warm-cache"))
	defer func() { _ = b.Stop(ctx) }()
	if err := a.Stop(ctx); err != nil { // resigns: b leads
		t.Fatal(err)
	}
	if got := next("run on start of the new leader"); got.Name != "warm-cache" {
		t.Fatalf("after the takeover ran %+v, want warm-cache's run on start alone", got)
	}
	jobs, err := b.JobList(ctx, &spool.JobListParams{Kind: "periodic_start_test", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs of runs on start, want 2: report's once and warm-cache's", len(jobs))
	}
	if !jobs[0].RunAt.Equal(first.At) {
		t.Fatalf("report's run on start: run at %v, want its start %v", jobs[0].RunAt, first.At)
	}
	recs, err := b.PeriodicRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || !recs[0].StartedAt.Equal(first.At) || recs[0].Name != "report" {
		t.Fatalf("records %+v, want report started at %v", recs, first.At)
	}
}
