package spooltest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/spooltest"
)

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

func (emailArgs) Kind() string { return "email" }

// TestFind: args match by the fields the expected value encodes; options
// narrow; a transaction's own inserts are seen through it only.
func TestFind(t *testing.T) {
	ctx := context.Background()
	be := memory.New()
	c, err := spool.NewClient(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []emailArgs{{To: "a@x", Subject: "hi"}, {To: "b@x", Subject: "hi"}, {To: "a@x", Subject: "bye"}} {
		if _, err := c.Insert(ctx, a, &spool.InsertOpts{Queue: "mail", Tags: []string{"t1"}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(tx any, want emailArgs, o *spooltest.Opts) int {
		t.Helper()
		jobs, err := spooltest.Find(ctx, c, tx, want, o)
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	three := 3
	for _, tc := range []struct {
		want emailArgs
		opts *spooltest.Opts
		n    int
	}{
		{emailArgs{To: "a@x"}, nil, 2},
		{emailArgs{To: "a@x", Subject: "hi"}, nil, 1},
		{emailArgs{}, nil, 0}, // To is not omitempty: "" must match
		{emailArgs{To: "c@x"}, nil, 0},
		{emailArgs{To: "a@x"}, &spooltest.Opts{Queue: "other"}, 0},
		{emailArgs{To: "a@x"}, &spooltest.Opts{Queue: "mail", State: spool.JobStateAvailable, Tags: []string{"t1"}}, 2},
		{emailArgs{To: "a@x"}, &spooltest.Opts{Tags: []string{"t2"}}, 0},
		{emailArgs{To: "a@x"}, &spooltest.Opts{Priority: &three}, 0},
	} {
		if got := count(nil, tc.want, tc.opts); got != tc.n {
			t.Errorf("Find(%+v, %+v) = %d jobs, want %d", tc.want, tc.opts, got, tc.n)
		}
	}
	tx := be.Begin()
	if _, err := c.InsertTx(ctx, tx, emailArgs{To: "tx@x"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := count(tx, emailArgs{To: "tx@x"}, nil); got != 1 {
		t.Fatalf("through the transaction: %d jobs, want 1", got)
	}
	if got := count(nil, emailArgs{To: "tx@x"}, nil); got != 0 {
		t.Fatalf("outside the open transaction: %d jobs, want 0", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	spooltest.RequireInserted(ctx, t, c, emailArgs{To: "b@x"}, nil)
	spooltest.RequireNotInserted(ctx, t, c, emailArgs{To: "tx@x"}, nil)
	spooltest.RequireInsertedCount(ctx, t, c, emailArgs{To: "a@x"}, nil, 2)
}

// TestWork: Work runs the client's worker for the job at once and returns
// the job as stored after: completed, or retryable with the error.
func TestWork(t *testing.T) {
	ctx := context.Background()
	ws := spool.NewWorkers()
	var got []string
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[emailArgs]) error {
		got = append(got, j.Args.To)
		if j.Args.To == "bad" {
			return errors.New("mailbox full")
		}
		return nil
	}))
	c, err := spool.NewClient(memory.New(), &spool.Config{Workers: ws, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	job := spooltest.Work(ctx, t, c, emailArgs{To: "a@x"}, &spool.InsertOpts{Queue: "ignored"})
	if job.State != spool.JobStateCompleted || len(got) != 1 || got[0] != "a@x" {
		t.Fatalf("work: job %s, handler saw %v", job.State, got)
	}
	failed := spooltest.Work(ctx, t, c, emailArgs{To: "bad"}, nil)
	if failed.State != spool.JobStateRetryable || len(failed.Errors) != 1 || failed.Errors[0].Error != "mailbox full" {
		t.Fatalf("failing work: %s %+v", failed.State, failed.Errors)
	}
	if _, err := c.WorkOne(ctx, "empty"); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("WorkOne of an empty queue: %v, want ErrNotFound", err)
	}
}

// fakeTB records a fatal failure and ends the goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails runs fn with a fake test and returns its failure message.
func fails(fn func(tb testing.TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// TestRequireFails: the Require functions fail the test, naming the
// expected args and the count, when the store does not hold what they
// require.
func TestRequireFails(t *testing.T) {
	ctx := context.Background()
	c, err := spool.NewClient(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, emailArgs{To: "a@x"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fn   func(tb testing.TB)
		want string
	}{
		{func(tb testing.TB) { spooltest.RequireInserted(ctx, tb, c, emailArgs{To: "z@x"}, nil) }, `0 jobs of kind "email" match {"to":"z@x"}, want exactly 1`},
		{func(tb testing.TB) { spooltest.RequireNotInserted(ctx, tb, c, emailArgs{To: "a@x"}, nil) }, `1 jobs of kind "email" match {"to":"a@x"}, want none (ids 1)`},
		{func(tb testing.TB) { spooltest.RequireInsertedCount(ctx, tb, c, emailArgs{To: "a@x"}, nil, 2) }, `want 2`},
		{func(tb testing.TB) { spooltest.RequireInserted(ctx, tb, c, emailArgs{To: "a@x"}, nil) }, ``},
	} {
		if got := fails(tc.fn); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("failure %q, want one containing %q", got, tc.want)
		}
	}
}
