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
		var meta map[string]string
		if err := json.Unmarshal(j.Metadata, &meta); err != nil || meta["spool_periodic"] != "every-50ms" || meta["team"] != "ops" {
			t.Fatalf("job %d metadata %s", j.ID, j.Metadata)
		}
		if j.Queue != "cron" || j.Priority != 3 || j.UniqueKey == "" {
			t.Fatalf("job %d: queue %s priority %d key %q, want the job's options and a unique key", j.ID, j.Queue, j.Priority, j.UniqueKey)
		}
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
