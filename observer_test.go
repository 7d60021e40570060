package spool_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	spool.NopObserver
	mu       sync.Mutex
	inserted map[string]int // "queue/kind"
	claims   int
	claimed  int
	started  map[int64]time.Duration
	finished map[spool.EventKind]int
	lost     map[string]int
	up       []bool
}

func newRecorder() *recorder {
	return &recorder{inserted: map[string]int{}, started: map[int64]time.Duration{}, finished: map[spool.EventKind]int{}, lost: map[string]int{}}
}

func (r *recorder) JobsInserted(queue, kind string, n int) {
	r.mu.Lock()
	r.inserted[queue+"/"+kind] += n
	r.mu.Unlock()
}

func (r *recorder) ClaimDone(queue string, jobs int, took time.Duration, err error) {
	r.mu.Lock()
	r.claims++
	r.claimed += jobs
	r.mu.Unlock()
}

func (r *recorder) JobStarted(j *spool.JobRow, pickup time.Duration) {
	r.mu.Lock()
	r.started[j.ID] = pickup
	r.mu.Unlock()
}

func (r *recorder) JobFinished(e *spool.Event) {
	r.mu.Lock()
	r.finished[e.Kind]++
	r.mu.Unlock()
}

func (r *recorder) LeasesLost(queue string, n int) {
	r.mu.Lock()
	r.lost[queue] += n
	r.mu.Unlock()
}

func (r *recorder) NotifierUp(up bool) {
	r.mu.Lock()
	r.up = append(r.up, up)
	r.mu.Unlock()
}

func (r *recorder) read(f func(r *recorder) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// TestObserver: an observer hears of inserts by queue and kind, every
// claim, each start with its pickup, each applied outcome, the lease a
// cancellation took from a running job, and the notifier's subscription.
func TestObserver(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder()
	block := make(chan struct{})
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[eventArgs]) error {
		switch j.Args.Mode {
		case "fail-once":
			if j.Attempt == 1 {
				return errors.New("flaky")
			}
		case "block":
			close(block)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}))
	c, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4}, "other": {MaxWorkers: 1}},
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
		PollInterval: 10 * time.Millisecond,
		RetryPolicy:  spool.ConstantRetryPolicy{Delay: 5 * time.Millisecond},
		Observers:    []spool.Observer{rec},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spool.NewClient(memory.New(), &spool.Config{Observers: []spool.Observer{nil}}); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Fatalf("a nil observer: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if _, err := c.InsertMany(ctx, []spool.InsertManyParams{{Args: eventArgs{Mode: "ok"}}, {Args: eventArgs{Mode: "fail-once"}}}); err != nil {
		t.Fatal(err)
	}
	blocked, err := c.Insert(ctx, eventArgs{Mode: "block"}, &spool.InsertOpts{Queue: "other"})
	if err != nil {
		t.Fatal(err)
	}
	<-block
	if _, err := c.JobCancel(ctx, blocked.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !rec.read(func(r *recorder) bool { return r.finished[spool.EventJobCompleted] == 2 && r.lost["other"] == 1 }) {
		if time.Now().After(deadline) {
			rec.read(func(r *recorder) bool { t.Fatalf("observer saw: %+v", r); return false })
		}
		time.Sleep(10 * time.Millisecond)
	}
	rec.read(func(r *recorder) bool {
		if r.inserted["default/event_test"] != 2 || r.inserted["other/event_test"] != 1 {
			t.Errorf("inserted: %v", r.inserted)
		}
		if r.finished[spool.EventJobFailed] != 1 {
			t.Errorf("finished: %v", r.finished)
		}
		if len(r.started) != 3 || r.claimed < 4 || r.claims < r.claimed/4 {
			t.Errorf("started %d jobs, %d claims took %d jobs; want 3 jobs started and 4 claimed (one retried)", len(r.started), r.claims, r.claimed)
		}
		for id, p := range r.started {
			if p < -time.Second || p > 5*time.Second {
				t.Errorf("job %d: pickup %s", id, p)
			}
		}
		if len(r.up) == 0 || !r.up[0] {
			t.Errorf("notifier states: %v, want up first", r.up)
		}
		return true
	})
}
