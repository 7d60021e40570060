package spool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// CleanupSessions is the args of a periodic job: it deletes the sessions
// that expired before its slot.
type CleanupSessions struct {
	Before time.Time `json:"before"`
}

// Kind names the job type.
func (CleanupSessions) Kind() string { return "cleanup_sessions" }

// slots is a Schedule of a few fixed times. A program would use
// spool.Every(15*time.Minute) or cron.MustParse("0 9 * * MON-FRI", loc);
// any type with Next is a schedule.
type slots []time.Time

// Next returns the first slot after t, or the zero time when none is left.
func (s slots) Next(t time.Time) time.Time {
	for _, slot := range s {
		if slot.After(t) {
			return slot
		}
	}
	return time.Time{}
}

// ExamplePeriodicJob registers a periodic job: the elected leader among
// the clients inserts one job per slot, with the slot as its run time and
// the periodic job's name in its metadata. The schedule here has two slots
// a second ahead: a client that does not lead yet looks again about once a
// second. See docs/periodic.md.
func ExamplePeriodicJob() {
	ctx := context.Background()
	start := time.Now().Truncate(time.Millisecond) // stores keep microseconds
	schedule := slots{start.Add(time.Second), start.Add(time.Second + 20*time.Millisecond)}

	ran := make(chan *spool.Job[CleanupSessions])
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[CleanupSessions]) error {
		ran <- job
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		PeriodicJobs: []spool.PeriodicJob{{
			Name:     "cleanup-sessions",
			Schedule: schedule,
			Args:     func(slot time.Time) spool.JobArgs { return CleanupSessions{Before: slot} },
		}},
		Logger: quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	for i := range schedule {
		job := <-ran
		fmt.Printf("slot %d: job %d, run at its slot %t, metadata %s\n",
			i+1, job.ID, job.RunAt.Equal(schedule[i]), job.Metadata)
	}
	// Output:
	// slot 1: job 1, run at its slot true, metadata {"spool_periodic":"cleanup-sessions"}
	// slot 2: job 2, run at its slot true, metadata {"spool_periodic":"cleanup-sessions"}
}
