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
)

type failArgs struct {
	Mode string `json:"mode"`
}

func (failArgs) Kind() string { return "fail_test" }

// recordLog keeps every record logged through it.
type recordLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }

// matching returns the records with message msg, each as its attributes.
func (h *recordLog) matching(msg string) []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{"level": slog.StringValue(r.Level.String())}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

const (
	msgFailed    = "spool: job failed; it will be retried"
	msgLast      = "spool: job failed on its last attempt and was discarded"
	msgDiscarded = "spool: job discarded"
)

// TestFailuresLogged: at the default level, a failed attempt is a Warn that
// names the job, its attempt, the error and the next run time; the last
// failed attempt and a discard are Errors; a flood of failures is cut to
// the rate limit, and the next line logged says how many were dropped.
func TestFailuresLogged(t *testing.T) {
	ctx := context.Background()
	logs := &recordLog{}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[failArgs]) error {
		if j.Args.Mode == "discard" {
			return spool.Discard(errors.New("bad input"))
		}
		return errors.New("smtp refused")
	}))
	be := memory.New()
	c, err := spool.NewClient(be, &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 20}},
		Logger:       slog.New(logs),
		PollInterval: 10 * time.Millisecond,
		RetryPolicy:  spool.ConstantRetryPolicy{Delay: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	retried, err := c.Insert(ctx, failArgs{}, &spool.InsertOpts{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	last, err := c.Insert(ctx, failArgs{}, &spool.InsertOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	discarded, err := c.Insert(ctx, failArgs{Mode: "discard"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	waitLogged(t, logs, msgFailed, 1)
	waitLogged(t, logs, msgLast, 1)
	waitLogged(t, logs, msgDiscarded, 1)

	w := logs.matching(msgFailed)[0]
	if w["level"].String() != "WARN" || w["job_id"].Int64() != retried.ID || w["kind"].String() != "fail_test" ||
		w["attempt"].String() != "1/2" || w["error"].String() != "smtp refused" {
		t.Fatalf("failed attempt logged as %v", w)
	}
	if next := w["next_run_at"].Time(); next.Before(time.Now().Add(59*time.Minute)) || next.After(time.Now().Add(61*time.Minute)) {
		t.Fatalf("next_run_at %v, want about an hour from now", next)
	}
	e := logs.matching(msgLast)[0]
	if e["level"].String() != "ERROR" || e["job_id"].Int64() != last.ID || e["attempt"].String() != "1/1" {
		t.Fatalf("last attempt logged as %v", e)
	}
	d := logs.matching(msgDiscarded)[0]
	if d["level"].String() != "ERROR" || d["job_id"].Int64() != discarded.ID || d["error"].String() != "bad input" {
		t.Fatalf("discard logged as %v", d)
	}

	// A flood: 300 failures at once log at most the burst (20) plus what
	// the rate (10/s) refills meanwhile.
	params := make([]spool.InsertManyParams, 300)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: failArgs{}, InsertOpts: &spool.InsertOpts{MaxAttempts: 5}}
	}
	began := time.Now()
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := 0
		jobs, err := be.JobList(ctx, &spool.JobListParams{States: []spool.JobState{spool.JobStateRetryable}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n = len(jobs)
		if n >= 301 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 301 jobs retryable after 15 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(began)
	logged := len(logs.matching(msgFailed)) - 1
	if limit := 20 + int(took.Seconds()*10) + 1; logged > limit {
		t.Fatalf("%d failures logged in %v, over the limit of %d", logged, took, limit)
	}
	if logged < 10 {
		t.Fatalf("only %d of 300 failures logged: the limiter let too few through", logged)
	}
	// Once tokens refill, the next failure's line counts the ones dropped.
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Insert(ctx, failArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	all := waitLogged(t, logs, msgFailed, logged+2)
	if dropped := all[len(all)-1]["not_logged_before_this"].Int64(); int(dropped) != 300-logged {
		t.Fatalf("the line after the flood says %d dropped, want %d", dropped, 300-logged)
	}
}

// waitLogged waits until n records with message msg were logged.
func waitLogged(t *testing.T, logs *recordLog, msg string, n int) []map[string]slog.Value {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if got := logs.matching(msg); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records %q, want %d", len(logs.matching(msg)), msg, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
