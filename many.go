package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/internal/engine"
)

// ManyWorker works jobs whose args are of type T many at a time: one call
// receives up to ManyConfig.MaxJobs jobs claimed together (docs/many.md).
//
// WorkMany's result decides each job's outcome: nil completes them all; a
// JobErrors gives each job its own result (read as Worker.Work's: nil
// completes, Snooze, Cancel and Discard do what they say, any other error
// fails the attempt), and jobs it does not name complete; any other error
// is every job's result. A panic is recovered and fails every job of the
// call, with its stack recorded.
//
// ctx is the call's: it ends at the call's timeout, on a hard stop, and
// when every job of the call has lost its lease or been cancelled. Each
// job also has a context of its own, JobContext(ctx, job), which ends when
// that job alone is cancelled or loses its lease, and through which
// RecordOutput, UpdateMetadata and JobStartedAt work on that job.
type ManyWorker[T JobArgs] interface {
	WorkMany(ctx context.Context, jobs []*Job[T]) error
}

// WorkManyFunc adapts a function to a ManyWorker.
func WorkManyFunc[T JobArgs](f func(ctx context.Context, jobs []*Job[T]) error) ManyWorker[T] {
	return workManyFunc[T](f)
}

type workManyFunc[T JobArgs] func(ctx context.Context, jobs []*Job[T]) error

// WorkMany implements ManyWorker.
func (f workManyFunc[T]) WorkMany(ctx context.Context, jobs []*Job[T]) error { return f(ctx, jobs) }

// ManyConfig says how the jobs of a ManyWorker's kind are gathered into
// calls.
type ManyConfig[T JobArgs] struct {
	// MaxJobs bounds the jobs of one call, 1 to 10,000. Each job of a call
	// holds one of its queue's worker slots (QueueConfig.MaxWorkers), so a
	// call never holds more jobs than the queue has slots, and a queue
	// runs several calls at once only with MaxWorkers above MaxJobs.
	// Defaults to 100.
	MaxJobs int
	// MaxWait is how long the first job of a group waits for more to join
	// before its call starts with what it has; a call also starts as soon
	// as it is full, or when its queue has no free slot left. The jobs'
	// leases are extended while they wait. 0 (the default) starts a call
	// with the jobs at hand.
	MaxWait time.Duration
	// GroupBy, when set, returns a job's group key from its args: only
	// jobs with the same key share a call (a tenant, an account, the
	// endpoint a call sends them to). It runs on the queue's producer
	// goroutine, so it must be cheap; a job whose args do not decode, or
	// for which it panics, goes to the group of the empty key.
	GroupBy func(args T) string
	// Timeout bounds each call: 0 uses Config.JobTimeout, a negative
	// value means none. Every job of the call times out with it.
	Timeout time.Duration
}

// maxManyJobs bounds ManyConfig.MaxJobs.
const maxManyJobs = 10000

// JobErrors, returned by ManyWorker.WorkMany, gives each job of the call
// its own result, by job id: nil completes the job, Snooze, Cancel and
// Discard do what they say, any other error fails its attempt. Jobs it
// does not name complete; ids of jobs outside the call are ignored.
//
//	errs := spool.JobErrors{}
//	for _, j := range jobs {
//		if err := send(j); err != nil {
//			errs[j.ID] = err
//		}
//	}
//	return errs
type JobErrors map[int64]error

// Error implements error: the jobs that did not complete and why.
func (e JobErrors) Error() string {
	ids := make([]int64, 0, len(e))
	for id, err := range e {
		if err != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "%d job(s) not completed", len(ids))
	for i, id := range ids {
		if i == 5 {
			fmt.Fprintf(&b, "; %d more", len(ids)-i)
			break
		}
		fmt.Fprintf(&b, "; job %d: %v", id, e[id])
	}
	return b.String()
}

// AddManyWorker registers w for the kind of T: its handler receives many
// jobs per call, gathered as cfg says. It panics where AddManyWorkerSafely
// returns an error: both are programming errors found at start-up.
func AddManyWorker[T JobArgs](ws *Workers, w ManyWorker[T], cfg ManyConfig[T]) {
	if err := AddManyWorkerSafely(ws, w, cfg); err != nil {
		panic(err)
	}
}

// AddManyWorkerSafely is AddManyWorker returning an error (ErrInvalidConfig)
// for an empty kind, a kind registered twice, or a config out of range.
func AddManyWorkerSafely[T JobArgs](ws *Workers, w ManyWorker[T], cfg ManyConfig[T]) error {
	var zero T
	kind := kindOf(zero)
	switch {
	case kind == "":
		return fmt.Errorf("add many-worker for %T: %w: empty kind", zero, ErrInvalidConfig)
	case w == nil:
		return fmt.Errorf("add many-worker for kind %q: %w: nil worker", kind, ErrInvalidConfig)
	case cfg.MaxJobs < 0 || cfg.MaxJobs > maxManyJobs:
		return fmt.Errorf("add many-worker for kind %q: %w: MaxJobs %d is out of range 1..%d", kind, ErrInvalidConfig, cfg.MaxJobs, maxManyJobs)
	case cfg.MaxWait < 0:
		return fmt.Errorf("add many-worker for kind %q: %w: negative MaxWait %s", kind, ErrInvalidConfig, cfg.MaxWait)
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = 100
	}
	decode := func(row *JobRow) (*Job[T], error) {
		job := &Job[T]{JobRow: row}
		if err := json.Unmarshal(row.Args, &job.Args); err != nil {
			return nil, &engine.DecodeError{Err: err}
		}
		return job, nil
	}
	runMany := func(ctx context.Context, rows []*JobRow) []error {
		errs := make([]error, len(rows))
		jobs := make([]*Job[T], 0, len(rows))
		at := make([]int, 0, len(rows)) // each job's place in rows
		for i, row := range rows {
			job, err := decode(row)
			if err != nil {
				errs[i] = err // discarded alone: no retry fixes it
				continue
			}
			jobs, at = append(jobs, job), append(at, i)
		}
		if len(jobs) == 0 {
			return errs
		}
		err := w.WorkMany(ctx, jobs)
		if err == nil {
			return errs
		}
		var per JobErrors
		if errors.As(err, &per) {
			for k, i := range at {
				errs[i] = per[jobs[k].ID]
			}
			return errs
		}
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	rules := &engine.ManyRules{MaxJobs: cfg.MaxJobs, MaxWait: cfg.MaxWait}
	if by := cfg.GroupBy; by != nil {
		rules.GroupKey = func(row *JobRow) (key string) {
			defer func() {
				if recover() != nil {
					key = ""
				}
			}()
			var args T
			if json.Unmarshal(row.Args, &args) != nil {
				return ""
			}
			return by(args)
		}
	}
	entry := engine.Handler{
		// One job alone (Client.WorkOne, spooltest.Work) is a call of one, in its own
		// context.
		Run: func(ctx context.Context, row *JobRow) error {
			return runMany(ctx, []*JobRow{row})[0]
		},
		RunMany: runMany,
		Timeout: func(*JobRow) time.Duration { return cfg.Timeout },
		NextRetry: func(row *JobRow) (time.Duration, bool) {
			if r, ok := w.(WorkerNextRetry[T]); ok {
				return r.NextRetry(&Job[T]{JobRow: row}), true
			}
			return 0, false
		},
	}
	return ws.add(kind, entry, rules)
}

// JobContext returns the context of job within the many-call whose
// context ctx is: it ends when that job is cancelled or loses its lease
// (as well as with the call), and RecordOutput, UpdateMetadata and
// JobStartedAt given it act on that job. Outside a many-call (a Worker's
// context, or a job not in the call) it returns ctx.
func JobContext[T JobArgs](ctx context.Context, job *Job[T]) context.Context {
	if o, ok := ctx.Value(jobContextsKey{}).(*jobContexts); ok {
		if c, ok := o.get(job.ID); ok {
			return c
		}
	}
	if c, ok := engine.JobContextIn(ctx, job.ID); ok {
		return c
	}
	return ctx
}

// CompleteManyTx marks running jobs completed inside the caller's
// transaction, in one statement, so that their effects and their
// completion commit or roll back together, as CompleteTx does for one.
// ctx is the handler's context (a call's or a job's). It changes nothing
// and returns an error matching ErrLeaseLost, naming the jobs, when the
// lease of any of them no longer holds; the caller should then roll back
// (or complete the others again without them). After a commit, the
// handler's own result for those jobs is ignored.
func CompleteManyTx[T JobArgs](ctx context.Context, tx any, jobs []*Job[T]) error {
	c, ok := ClientFromContext(ctx)
	if !ok {
		return errors.New("complete jobs in tx: context is not a spool job context")
	}
	if tx == nil {
		return fmt.Errorf("complete %d jobs in tx: %w: nil transaction", len(jobs), ErrTxType)
	}
	if len(jobs) == 0 {
		return nil
	}
	finishes := make([]backend.JobFinish, len(jobs))
	for i, j := range jobs {
		finishes[i] = backend.JobFinish{Lease: j.Lease(), Outcome: backend.OutcomeComplete}
	}
	res, err := c.backend.JobFinishMany(ctx, &backend.JobFinishManyParams{
		Tx:              tx,
		Finishes:        finishes,
		DeleteCompleted: c.config.CompletedRetention < 0,
	})
	if err == nil {
		err = res.Incomplete()
	}
	if err != nil {
		return fmt.Errorf("complete %d jobs in tx: %w", len(jobs), err)
	}
	if len(res.Rejected) > 0 {
		ids := make([]int64, len(res.Rejected))
		for i, l := range res.Rejected {
			ids[i] = l.ID
		}
		return fmt.Errorf("complete %d jobs in tx: jobs %v: %w", len(jobs), ids, ErrLeaseLost)
	}
	for _, j := range jobs {
		c.engine.CompletedInTx(j.Lease())
	}
	return nil
}

// jobContextsKey carries, in a many-call's context wrapped by work
// middleware, the context each job's middleware passed on.
type jobContextsKey struct{}

// jobContexts is read by JobContext, from any goroutine of the handler:
// it is complete before the handler starts and never changes after.
type jobContexts struct {
	byID map[int64]context.Context
}

func (o *jobContexts) get(id int64) (context.Context, bool) {
	c, ok := o.byID[id]
	return c, ok
}

// errSkippedByMiddleware is the result of the jobs of a call whose
// handler did not run because the middleware of one of them did not call
// next.
var errSkippedByMiddleware = errors.New("not run: the work middleware of another job of the call did not call next, so the call did not run")

// wrapMany returns runMany with the work middleware around each job of the
// call: job k's middleware runs in job k's context and its next goes on
// with job k+1's middleware, the last one's with the handler, which sees
// the context each middleware passed on as JobContext's; each job's
// middleware returns that job's result, which it may change.
func wrapMany(runMany func(context.Context, []*JobRow) []error, mws []WorkMiddleware) func(context.Context, []*JobRow) []error {
	return func(ctx context.Context, rows []*JobRow) []error {
		ctxs := make([]context.Context, len(rows))
		errs := make([]error, len(rows))
		reached := make([]bool, len(rows))
		var results []error
		var job func(k int)
		job = func(k int) {
			if k == len(rows) {
				byID := make(map[int64]context.Context, len(rows))
				for i, r := range rows {
					byID[r.ID] = ctxs[i]
				}
				results = runMany(context.WithValue(ctx, jobContextsKey{}, &jobContexts{byID: byID}), rows)
				return
			}
			reached[k] = true
			jctx, ok := engine.JobContextIn(ctx, rows[k].ID)
			if !ok {
				jctx = ctx
			}
			var call func(i int, c context.Context) error
			call = func(i int, c context.Context) error {
				if i == len(mws) {
					ctxs[k] = c
					job(k + 1)
					if results == nil {
						return errSkippedByMiddleware
					}
					return results[k]
				}
				return mws[i](c, rows[k], func(c context.Context) error { return call(i+1, c) })
			}
			errs[k] = call(0, jctx)
		}
		job(0)
		for k, ok := range reached {
			if !ok {
				errs[k] = errSkippedByMiddleware
			}
		}
		return errs
	}
}
