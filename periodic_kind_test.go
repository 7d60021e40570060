package spool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// TestPeriodicKindNeedsWorker: a client with Workers refuses a periodic
// job whose kind none of them works (it would fail at every slot), unless
// AllowUnknownKinds says another process works it; an insert-only client,
// which never fires periodic jobs, takes it. The kind is that of Args for
// the next slot.
func TestPeriodicKindNeedsWorker(t *testing.T) {
	be := memory.New()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[WelcomeEmail]) error { return nil }))
	queues := map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}}
	var seen []time.Time
	periodic := func(args func(time.Time) spool.JobArgs) []spool.PeriodicJob {
		return []spool.PeriodicJob{{Name: "hourly", Schedule: spool.Every(time.Hour), Args: func(slot time.Time) spool.JobArgs {
			seen = append(seen, slot)
			return args(slot)
		}}}
	}
	unworked := periodic(func(time.Time) spool.JobArgs { return periodicArgs{} })

	before := time.Now()
	_, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: queues, PeriodicJobs: unworked})
	if !errors.Is(err, spool.ErrInvalidConfig) || !errors.Is(err, spool.ErrUnknownKind) {
		t.Fatalf("periodic job of a kind without a worker: %v, want ErrInvalidConfig and ErrUnknownKind", err)
	}
	for _, want := range []string{`"hourly"`, `"periodic_test"`, "spool.AddWorker", "AllowUnknownKinds"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(seen) != 1 || !seen[0].Equal(spool.Every(time.Hour).Next(before)) && !seen[0].Equal(spool.Every(time.Hour).Next(time.Now())) {
		t.Errorf("Args was called with %v, want once with the next slot", seen)
	}

	if _, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: queues, PeriodicJobs: unworked, AllowUnknownKinds: true}); err != nil {
		t.Errorf("with AllowUnknownKinds: %v", err)
	}
	if _, err := spool.NewClient(be, &spool.Config{PeriodicJobs: unworked}); err != nil {
		t.Errorf("insert-only client: %v", err)
	}
	worked := periodic(func(time.Time) spool.JobArgs { return WelcomeEmail{} })
	if _, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: queues, PeriodicJobs: worked}); err != nil {
		t.Errorf("periodic job of a worked kind: %v", err)
	}

	// An Args that fails tells no kind: NewClient takes the job, and the
	// leader reports the failure at each slot.
	for name, args := range map[string]func(time.Time) spool.JobArgs{
		"panics":      func(time.Time) spool.JobArgs { panic("no config yet") },
		"returns nil": func(time.Time) spool.JobArgs { return nil },
	} {
		if _, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: queues, PeriodicJobs: periodic(args)}); err != nil {
			t.Errorf("Args that %s: %v, want the client made", name, err)
		}
	}
}
