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
// the rate limit, and the lines logged account for every failure dropped.
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
	waitRetryable(t, be, 301)
	took := time.Since(began)
	logged := len(logs.matching(msgFailed)) - 1
	if limit := 20 + int(took.Seconds()*10) + 1; logged > limit {
		t.Fatalf("%d failures logged in %v, over the limit of %d", logged, took, limit)
	}
	if logged < 10 {
		t.Fatalf("only %d of 300 failures logged: the limiter let too few through", logged)
	}
	// Every failure is either a line of its own or counted by exactly one
	// later line's not_logged_before_this (the count since the previous
	// line, so lines logged while tokens refilled mid-flood each carry
	// their share). The drops after the last line so far are reported by
	// the next line logged: driveToLine fails one job at a time, each
	// waited for until it is recorded, until one is logged, and returns how
	// many it failed.
	driveToLine := func() int {
		n, before := 0, len(logs.matching(msgFailed))
		for len(logs.matching(msgFailed)) == before {
			j, err := c.Insert(ctx, failArgs{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			n++
			waitState(t, be, j.ID, spool.JobStateRetryable)
		}
		return n
	}
	extra := driveToLine()
	// A second, smaller flood right after: its drops must be counted apart
	// from the first one's, which the line above already reported.
	params = params[:50]
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	waitRetryable(t, be, 301+extra+50)
	extra += driveToLine()
	accounted := 0
	for _, l := range logs.matching(msgFailed) {
		if d, ok := l["not_logged_before_this"]; ok {
			accounted += int(d.Int64())
		}
		accounted++
	}
	if want := 1 + 300 + 50 + extra; accounted != want {
		t.Fatalf("lines plus the drops they report account for %d failures, want %d (1 before the floods, 300 and 50 in them, %d after)", accounted, want, extra)
	}
}

// waitRetryable waits until n jobs are retryable.
func waitRetryable(t *testing.T, be *memory.Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		jobs, err := be.JobList(context.Background(), &spool.JobListParams{States: []spool.JobState{spool.JobStateRetryable}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs retryable after 15 s", len(jobs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitState waits until job id is in state want.
func waitState(t *testing.T, be *memory.Backend, id int64, want spool.JobState) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		j, err := be.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d %s after 15 s, want %s", id, j.State, want)
		}
		time.Sleep(5 * time.Millisecond)
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
