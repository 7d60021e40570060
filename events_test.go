package spool_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
)

type eventArgs struct {
	Mode string `json:"mode"`
}

func (eventArgs) Kind() string { return "event_test" }

// TestEvents: each outcome of a run is reported once written, with the
// run's duration and error; a subscription gets only its kinds; an
// operator's retry is reported; ending a subscription closes its channel.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	tries := map[string]int{}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[eventArgs]) error {
		mu.Lock()
		tries[j.Args.Mode]++
		n := tries[j.Args.Mode]
		mu.Unlock()
		switch j.Args.Mode {
		case "slow":
			time.Sleep(30 * time.Millisecond)
		case "fail-once":
			if n == 1 {
				return errors.New("flaky")
			}
		case "discard":
			return spool.Discard(errors.New("bad input"))
		case "cancel":
			return spool.Cancel(errors.New("not wanted"))
		case "snooze":
			if n == 1 {
				return spool.Snooze(time.Millisecond)
			}
		}
		return nil
	}))
	c, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 4}},
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
		PollInterval: 10 * time.Millisecond,
		RetryPolicy:  spool.ConstantRetryPolicy{Delay: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	all, endAll := c.Subscribe()
	discards, endDiscards := c.Subscribe(spool.EventJobDiscarded)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	ids := map[string]int64{}
	for _, m := range []string{"slow", "fail-once", "discard", "cancel", "snooze"} {
		res, err := c.Insert(ctx, eventArgs{Mode: m}, &spool.InsertOpts{MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		ids[m] = res.ID
	}
	want := map[int64][]spool.EventKind{
		ids["slow"]:      {spool.EventJobCompleted},
		ids["fail-once"]: {spool.EventJobFailed, spool.EventJobCompleted},
		ids["discard"]:   {spool.EventJobDiscarded},
		ids["cancel"]:    {spool.EventJobCancelled},
		ids["snooze"]:    {spool.EventJobSnoozed, spool.EventJobCompleted},
	}
	got := map[int64][]*spool.Event{}
	for n := 0; n < 7; n++ {
		select {
		case e := <-all:
			got[e.JobID] = append(got[e.JobID], e)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events after 10 s, want 7: %v", n, got)
		}
	}
	for id, kinds := range want {
		var seen []spool.EventKind
		for _, e := range got[id] {
			seen = append(seen, e.Kind)
			if e.JobKind != "event_test" || e.Queue != spool.DefaultQueue || e.MaxAttempts != 3 || e.At.IsZero() {
				t.Errorf("event %+v: wrong job fields", e)
			}
		}
		if !slices.Equal(seen, kinds) {
			t.Errorf("job %d: events %v, want %v", id, seen, kinds)
		}
	}
	if e := got[ids["slow"]][0]; e.Duration < 30*time.Millisecond {
		t.Errorf("slow job's duration %v, want at least 30 ms", e.Duration)
	}
	if e := got[ids["fail-once"]][0]; e.Error != "flaky" || e.NextRunIn != 5*time.Millisecond || e.Attempt != 1 {
		t.Errorf("failed attempt's event %+v", e)
	}
	if e := got[ids["discard"]][0]; e.Error != "bad input" {
		t.Errorf("discard's event %+v", e)
	}
	if e := <-discards; e.JobID != ids["discard"] || len(discards) != 0 {
		t.Errorf("the discard subscription got %+v and %d more", e, len(discards))
	}
	endDiscards()
	if _, ok := <-discards; ok {
		t.Error("an ended subscription's channel is open")
	}
	endDiscards() // twice is fine

	if _, err := c.JobRetry(ctx, ids["discard"]); err != nil {
		t.Fatal(err)
	}
	// The retried job runs again at once, and its new run's outcome may be
	// reported before the retry's own event (JobRetry reports it once the
	// retry has committed, when a worker may already hold the job): only
	// events of that job may come first.
	for waiting := true; waiting; {
		select {
		case e := <-all:
			if e.JobID != ids["discard"] {
				t.Fatalf("after JobRetry: %+v, an event of another job", e)
			}
			waiting = e.Kind != spool.EventJobRetried
		case <-time.After(10 * time.Second):
			t.Fatal("no job_retried event after JobRetry")
		}
	}
	endAll()
}

type tenantKey struct{}

// TestMiddleware: work middleware wraps every run in order and can fail a
// run without calling the handler; insert middleware can change jobs (here
// a tenant in metadata) and refuse them, and may not add or drop jobs.
func TestMiddleware(t *testing.T) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		trace []string
	)
	note := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	ran := make(chan string, 10)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[eventArgs]) error {
		note("handler")
		ran <- j.Args.Mode
		return nil
	}))
	mw := func(name string) spool.WorkMiddleware {
		return func(ctx context.Context, job *spool.JobRow, next func(context.Context) error) error {
			if name == "a" && string(job.Args) == `{"mode":"blocked"}` {
				return errors.New("blocked by middleware")
			}
			note(name + " before " + job.Kind)
			err := next(ctx)
			note(name + " after")
			return err
		}
	}
	tenant := func(ctx context.Context, jobs []spool.InsertManyParams, next func(context.Context, []spool.InsertManyParams) error) error {
		id, _ := ctx.Value(tenantKey{}).(string)
		if id == "" {
			return errors.New("no tenant in context")
		}
		for i := range jobs {
			o := spool.InsertOpts{}
			if jobs[i].InsertOpts != nil {
				o = *jobs[i].InsertOpts
			}
			o.Metadata = json.RawMessage(`{"tenant":"` + id + `"}`)
			jobs[i].InsertOpts = &o
		}
		return next(ctx, jobs)
	}
	be := memory.New()
	c, err := spool.NewClient(be, &spool.Config{
		Workers:          ws,
		Queues:           map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger:           conformance.TestLogger(t, slog.LevelWarn),
		PollInterval:     10 * time.Millisecond,
		WorkMiddleware:   []spool.WorkMiddleware{mw("a"), mw("b")},
		InsertMiddleware: []spool.InsertMiddleware{tenant},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, eventArgs{}, nil); err == nil {
		t.Fatal("insert without a tenant passed the middleware")
	}
	tctx := context.WithValue(ctx, tenantKey{}, "acme")
	ok, err := c.Insert(tctx, eventArgs{Mode: "ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blocked, err := c.Insert(tctx, eventArgs{Mode: "blocked"}, &spool.InsertOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := c.JobGet(ctx, ok.ID); string(j.Metadata) != `{"tenant":"acme"}` {
		t.Fatalf("metadata %s, want the tenant", j.Metadata)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	if m := <-ran; m != "ok" {
		t.Fatalf("ran %q", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := c.JobGet(ctx, blocked.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == spool.JobStateDiscarded {
			if len(j.Errors) != 1 || j.Errors[0].Error != "blocked by middleware" {
				t.Fatalf("blocked job's errors %+v", j.Errors)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blocked job is %s", j.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	got := slices.Clone(trace)
	mu.Unlock()
	if want := []string{"a before event_test", "b before event_test", "handler", "b after", "a after"}; !slices.Equal(got, want) {
		t.Fatalf("trace %q, want %q", got, want)
	}

	drop := func(ctx context.Context, jobs []spool.InsertManyParams, next func(context.Context, []spool.InsertManyParams) error) error {
		return next(ctx, jobs[:1])
	}
	c2, err := spool.NewClient(be, &spool.Config{InsertMiddleware: []spool.InsertMiddleware{drop}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.InsertMany(ctx, []spool.InsertManyParams{{Args: eventArgs{}}, {Args: eventArgs{}}}); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Fatalf("a middleware that drops a job: %v, want ErrInvalidConfig", err)
	}
	if jobs, _ := c.JobList(ctx, &spool.JobListParams{Kind: "event_test"}); len(jobs) != 2 {
		t.Fatalf("%d jobs stored, want the 2 inserted before", len(jobs))
	}
}
