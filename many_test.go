package spool

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend/memory"
)

type manyTestArgs struct {
	N int `json:"n"`
}

func (manyTestArgs) Kind() string { return "many_test" }

type spanKey struct{}

// Bad many-worker configs are refused with ErrInvalidConfig, and a kind
// takes one worker, single or many.
func TestAddManyWorkerChecks(t *testing.T) {
	w := WorkManyFunc(func(context.Context, []*Job[manyTestArgs]) error { return nil })
	for _, cfg := range []ManyConfig[manyTestArgs]{{MaxJobs: -1}, {MaxJobs: 10001}, {MaxWait: -time.Second}} {
		if err := AddManyWorkerSafely(NewWorkers(), w, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("config %+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	ws := NewWorkers()
	AddWorker(ws, WorkFunc(func(context.Context, *Job[manyTestArgs]) error { return nil }))
	if err := AddManyWorkerSafely(ws, w, ManyConfig[manyTestArgs]{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a many-worker for a kind with a worker: %v, want ErrInvalidConfig", err)
	}
	if ws.manyRules("many_test") != nil {
		t.Error("the refused many-worker's rules were kept")
	}
}

// JobErrors names the jobs that did not complete.
func TestJobErrorsMessage(t *testing.T) {
	e := JobErrors{3: errors.New("c"), 1: errors.New("a"), 2: nil}
	if got := e.Error(); got != "2 job(s) not completed; job 1: a; job 3: c" {
		t.Fatalf("JobErrors.Error() = %q", got)
	}
}

// Work middleware runs once per job of a call, in the job's own context;
// the context it passes on is the job's JobContext in the handler, and the
// result it returns is its job's. WorkOne runs a many-worker's job alone.
func TestManyMiddlewarePerJob(t *testing.T) {
	ctx := context.Background()
	var (
		mu      sync.Mutex
		wrapped []int64
		sawSpan = map[int64]bool{}
	)
	ws := NewWorkers()
	AddManyWorker(ws, WorkManyFunc(func(ctx context.Context, jobs []*Job[manyTestArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range jobs {
			sawSpan[j.ID] = JobContext(ctx, j).Value(spanKey{}) == j.ID
		}
		return errors.New("every job fails")
	}), ManyConfig[manyTestArgs]{MaxJobs: 10})
	mw := func(ctx context.Context, job *JobRow, next func(context.Context) error) error {
		mu.Lock()
		wrapped = append(wrapped, job.ID)
		mu.Unlock()
		err := next(context.WithValue(ctx, spanKey{}, job.ID))
		if job.ID%2 == 0 {
			return nil // the middleware turns this job's failure into success
		}
		return err
	}
	c, err := NewClient(memory.New(), &Config{Workers: ws, Logger: slog.New(slog.DiscardHandler),
		Queues:         map[string]QueueConfig{DefaultQueue: {MaxWorkers: 10}},
		WorkMiddleware: []WorkMiddleware{mw}})
	if err != nil {
		t.Fatal(err)
	}
	var params []InsertManyParams
	for i := range 4 {
		params = append(params, InsertManyParams{Args: manyTestArgs{N: i}, InsertOpts: &InsertOpts{MaxAttempts: 1}})
	}
	res, err := c.InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	done, end := c.Subscribe(EventJobCompleted, EventJobDiscarded)
	defer end()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	for range res {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("jobs not finished")
		}
	}
	mu.Lock()
	if len(wrapped) != 4 {
		t.Errorf("middleware ran for jobs %v, want each of 4 once", wrapped)
	}
	for _, r := range res {
		if !sawSpan[r.ID] {
			t.Errorf("job %d: JobContext lacks the value its middleware passed on", r.ID)
		}
	}
	mu.Unlock()
	for _, r := range res {
		j, err := c.JobGet(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := JobStateDiscarded
		if r.ID%2 == 0 {
			want = JobStateCompleted
		}
		if j.State != want {
			t.Errorf("job %d: %s, want %s", r.ID, j.State, want)
		}
	}

	// WorkOne: a call of one, in the job's own context.
	if _, err := c.Insert(ctx, manyTestArgs{N: 9}, &InsertOpts{Queue: "other", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	j, err := c.WorkOne(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case j.ID%2 == 0 && j.State != JobStateCompleted, // the middleware's success
		j.ID%2 == 1 && (j.State != JobStateDiscarded || !strings.Contains(j.Errors[0].Error, "every job fails")):
		t.Fatalf("WorkOne of many-worker job %d: %s %+v", j.ID, j.State, j.Errors)
	}
}
