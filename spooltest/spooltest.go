// Package spooltest helps an application's tests assert what its code
// enqueued and run a job's worker synchronously, on any backend:
//
//	spooltest.RequireInserted(ctx, t, client, SendEmail{To: "a@example.com"}, nil)
//	spooltest.RequireInsertedTx(ctx, t, client, tx, SendEmail{To: "a@example.com"}, nil)
//	spooltest.RequireNotInserted(ctx, t, client, SendEmail{}, nil)
//	job := spooltest.Work(ctx, t, client, SendEmail{To: "a@example.com"}, nil)
//
// Args match when every field the expected args encode is present in the
// stored args with an equal value: fields left out of the expected value by
// omitempty match anything, so a test names only what it cares about.
package spooltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// Opts narrows the jobs a Require function considers. Zero values do not
// narrow.
type Opts struct {
	Queue    string
	State    spool.JobState
	Priority *int
	Tags     []string // each must be among the job's tags
}

// RequireInserted fails the test unless exactly one job of expected's kind
// whose args match expected (and that matches opts) is stored, and returns
// it. It reads committed jobs.
func RequireInserted[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, expected T, opts *Opts) *spool.JobRow {
	t.Helper()
	return requireOne(ctx, t, c, nil, expected, opts)
}

// RequireInsertedTx is RequireInserted reading through tx, so that it sees
// the jobs tx inserted before it commits.
func RequireInsertedTx[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, tx any, expected T, opts *Opts) *spool.JobRow {
	t.Helper()
	return requireOne(ctx, t, c, tx, expected, opts)
}

// RequireInsertedCount fails the test unless exactly n matching jobs are
// stored, and returns them.
func RequireInsertedCount[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, expected T, opts *Opts, n int) []*spool.JobRow {
	t.Helper()
	jobs, err := Find(ctx, c, nil, expected, opts)
	if err != nil {
		t.Fatalf("spooltest: %v", err)
	}
	if len(jobs) != n {
		t.Fatalf("spooltest: %d jobs of kind %q match %s, want %d%s", len(jobs), expected.Kind(), describe(expected), n, listIDs(jobs))
	}
	return jobs
}

// RequireNotInserted fails the test if any job of expected's kind whose
// args match expected (and that matches opts) is stored.
func RequireNotInserted[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, expected T, opts *Opts) {
	t.Helper()
	RequireNotInsertedTx(ctx, t, c, nil, expected, opts)
}

// RequireNotInsertedTx is RequireNotInserted reading through tx.
func RequireNotInsertedTx[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, tx any, expected T, opts *Opts) {
	t.Helper()
	jobs, err := Find(ctx, c, tx, expected, opts)
	if err != nil {
		t.Fatalf("spooltest: %v", err)
	}
	if len(jobs) > 0 {
		t.Fatalf("spooltest: %d jobs of kind %q match %s, want none%s", len(jobs), expected.Kind(), describe(expected), listIDs(jobs))
	}
}

func requireOne[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, tx any, expected T, opts *Opts) *spool.JobRow {
	t.Helper()
	jobs, err := Find(ctx, c, tx, expected, opts)
	if err != nil {
		t.Fatalf("spooltest: %v", err)
	}
	if len(jobs) != 1 {
		t.Fatalf("spooltest: %d jobs of kind %q match %s, want exactly 1%s", len(jobs), expected.Kind(), describe(expected), listIDs(jobs))
	}
	return jobs[0]
}

// Find returns the stored jobs of expected's kind whose args match expected
// and that match opts, in id order; through tx when it is not nil.
func Find[T spool.JobArgs](ctx context.Context, c *spool.Client, tx any, expected T, opts *Opts) ([]*spool.JobRow, error) {
	want, err := json.Marshal(expected)
	if err != nil {
		return nil, fmt.Errorf("encode expected args of kind %q: %w", expected.Kind(), err)
	}
	var wantValue any
	if err := decode(want, &wantValue); err != nil {
		return nil, fmt.Errorf("decode expected args of kind %q: %w", expected.Kind(), err)
	}
	if opts == nil {
		opts = &Opts{}
	}
	p := &spool.JobListParams{Tx: tx, Kind: expected.Kind(), Queue: opts.Queue, Limit: 1000}
	if opts.State != "" {
		p.States = []spool.JobState{opts.State}
	}
	var out []*spool.JobRow
	for {
		jobs, err := c.JobList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list jobs of kind %q: %w", expected.Kind(), err)
		}
		for _, j := range jobs {
			var got any
			if err := decode(j.Args, &got); err != nil {
				return nil, fmt.Errorf("decode args of job %d: %w", j.ID, err)
			}
			if contains(got, wantValue) && matchesOpts(j, opts) {
				out = append(out, j)
			}
		}
		if len(jobs) < p.Limit {
			return out, nil
		}
		p.AfterID = jobs[len(jobs)-1].ID
	}
}

func decode(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// contains reports whether got has every field of want with an equal value
// (objects recursively; arrays and scalars must be equal).
func contains(got, want any) bool {
	wo, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(got, want)
	}
	gotObj, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wo {
		gv, ok := gotObj[k]
		if !ok || !contains(gv, wv) {
			return false
		}
	}
	return true
}

func matchesOpts(j *spool.JobRow, o *Opts) bool {
	if o.Priority != nil && int(j.Priority) != *o.Priority {
		return false
	}
	for _, tag := range o.Tags {
		found := false
		for _, have := range j.Tags {
			found = found || have == tag
		}
		if !found {
			return false
		}
	}
	return true
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func listIDs(jobs []*spool.JobRow) string {
	if len(jobs) == 0 {
		return ""
	}
	s := " (ids"
	for i, j := range jobs {
		if i == 10 {
			s += " …"
			break
		}
		s += " " + strconv.FormatInt(j.ID, 10)
	}
	return s + ")"
}

// queueSeq numbers Work's private queues; workStart tells them from other
// processes'.
var (
	queueSeq  atomic.Int64
	workStart = time.Now().UnixNano()
)

// Work inserts a job of args into a queue of its own and runs it at once on
// the calling goroutine with c's worker for its kind (and c's work
// middleware), as a worker would; it returns the job as stored afterwards.
// The handler's failure is not a test failure: check the returned job's
// State and Errors. opts.Queue is replaced by the private queue, and the
// job runs now whatever opts.RunAt and opts.Delay say.
func Work[T spool.JobArgs](ctx context.Context, t testing.TB, c *spool.Client, args T, opts *spool.InsertOpts) *spool.JobRow {
	t.Helper()
	o := spool.InsertOpts{}
	if opts != nil {
		o = *opts
	}
	// Unique within the process by the sequence, and across processes
	// sharing a store by the start time.
	o.Queue = "spooltest-" + strconv.FormatInt(workStart, 36) + "-" + strconv.FormatInt(queueSeq.Add(1), 10)
	o.RunAt, o.Delay = time.Time{}, 0
	if _, err := c.Insert(ctx, args, &o); err != nil {
		t.Fatalf("spooltest: insert job of kind %q: %v", args.Kind(), err)
	}
	job, err := c.WorkOne(ctx, o.Queue)
	if err != nil {
		t.Fatalf("spooltest: work job of kind %q: %v", args.Kind(), err)
	}
	return job
}
