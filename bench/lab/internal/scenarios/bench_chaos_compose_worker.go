package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// The composed workloads' side of a lab chaos worker process: handlers for
// workflow tasks and batch members, batch callbacks, many-job calls,
// jobs of durable steps and waits, and debounced jobs, each recording its
// starts and returns in the audit log as the plain chaos jobs do, and a
// loop inserting debounced jobs from the process.

// The composed workloads' queues and their workers per process: tasks,
// batches and many-calls in one (a many-call holds one slot per job, so it
// needs more than the default queue's); steps jobs in one of their own, so
// that a job resuming from a wait queues behind other steps jobs only;
// debounced jobs in a third, so that their cycles turn over beside the
// others' backlog.
const (
	composeQueue         = "compose"
	composeStepsQueue    = "compose_steps"
	composeDebounceQueue = "compose_debounce"
	composeConcurrency   = 16
	composeDebounceSlots = 4
)

// composeArgs are the fields every composed job's args share. Seq is the
// job's sequence number, in the producer's accounting (nil for jobs no
// insert acknowledges one by one: callbacks, debounced jobs).
type composeArgs struct {
	Seq     *int64 `json:"seq,omitempty"`
	SleepMS int    `json:"sleep_ms,omitempty"`
	// Fail fails the first attempt; Discard discards every attempt; Snooze
	// snoozes the first claim (many-jobs).
	Fail    bool `json:"fail,omitempty"`
	Discard bool `json:"discard,omitempty"`
	Snooze  bool `json:"snooze,omitempty"`
	// Effect: the job completes only with an effect row in the same
	// transaction (many-jobs, through CompleteManyTx).
	Effect bool `json:"effect,omitempty"`
	// Role is a batch callback's condition: success, failure or complete.
	Role string `json:"role,omitempty"`
	// Key is a debounced job's key.
	Key string `json:"key,omitempty"`
	// A steps job runs five steps; after step SleepAfter (0: none) a Sleep
	// of WaitMS, after step AwaitAfter (0: none) an AwaitSignal("go").
	SleepAfter int `json:"sleep_after,omitempty"`
	WaitMS     int `json:"wait_ms,omitempty"`
	AwaitAfter int `json:"await_after,omitempty"`
}

// The composed workloads' kinds, one Go type each.
type (
	chaosTaskArgs     struct{ composeArgs } // workflow tasks and batch members
	chaosCallbackArgs struct{ composeArgs } // batch callbacks
	chaosManyArgs     struct{ composeArgs } // jobs of a many-worker
	chaosStepsArgs    struct{ composeArgs } // jobs of durable steps and waits
	chaosDebounceArgs struct{ composeArgs } // debounced jobs
)

// Kind implements spool.JobArgs.
func (chaosTaskArgs) Kind() string { return "spool_chaos_task" }

// Kind implements spool.JobArgs.
func (chaosCallbackArgs) Kind() string { return "spool_chaos_callback" }

// Kind implements spool.JobArgs.
func (chaosManyArgs) Kind() string { return "spool_chaos_many" }

// Kind implements spool.JobArgs.
func (chaosStepsArgs) Kind() string { return "spool_chaos_steps" }

// Kind implements spool.JobArgs.
func (chaosDebounceArgs) Kind() string { return "spool_chaos_debounce" }

// composeSignal is the signal steps jobs await; stepsSignalTimeout its
// timeout, far beyond any run, so that a timeout means a lost signal.
const (
	composeSignal      = "go"
	stepsSignalTimeout = 30 * time.Minute
)

// durableStepName is the name of a steps job's step n (1 to 5).
func durableStepName(n int) string { return fmt.Sprintf("step-%d", n) }

// manyMaxJobs and manyMaxWait gather the many-worker's calls.
const (
	manyMaxJobs = 12
	manyMaxWait = 20 * time.Millisecond
)

// pause sleeps d or until ctx ends, returning ctx's cause then.
func pause(ctx context.Context, d time.Duration) error {
	if !sleepUntil(ctx, time.Now().Add(d)) {
		return context.Cause(ctx)
	}
	return nil
}

// addComposeWorkers registers the composed workloads' handlers.
func addComposeWorkers(ws *spool.Workers, w *chaosWorkerEnv, writeEffect effectWriter) error {
	task := func(ctx context.Context, j *spool.Job[chaosTaskArgs]) error {
		done, err := w.start(ctx, j.JobRow)
		if err != nil {
			return err
		}
		defer done()
		if err := pause(ctx, time.Duration(j.Args.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		switch {
		case j.Args.Discard:
			return spool.Discard(errors.New("lab chaos: planned discard"))
		case j.Args.Fail && j.Attempt == 1:
			return errPlannedFailure
		}
		return nil
	}
	callback := func(ctx context.Context, j *spool.Job[chaosCallbackArgs]) error {
		done, err := w.start(ctx, j.JobRow)
		if err != nil {
			return err
		}
		defer done()
		// What the callback sees: its batch final, every member counted.
		c, ok := spool.ClientFromContext(ctx)
		if !ok {
			return errors.New("lab chaos worker: no client in the job's context")
		}
		b, err := c.Batch(ctx, j.BatchID)
		if err != nil {
			return err
		}
		if b.FinishedAt == nil || b.Completed+b.Discarded+b.Cancelled != b.Total || !b.Sealed {
			w.audit.write(fmt.Sprintf("V %d callback %s saw batch %d unfinished: sealed=%v total=%d completed=%d discarded=%d cancelled=%d\n",
				j.ID, j.Args.Role, b.ID, b.Sealed, b.Total, b.Completed, b.Discarded, b.Cancelled))
		}
		return nil
	}
	many := func(ctx context.Context, jobs []*spool.Job[chaosManyArgs]) error {
		var complete []*spool.Job[chaosManyArgs]
		var leases []backend.LeaseRef
		errs := spool.JobErrors{}
		for _, j := range jobs {
			done, err := w.start(spool.JobContext(ctx, j), j.JobRow)
			if err != nil {
				errs[j.ID] = err
				continue
			}
			defer done()
			switch {
			case j.Args.Fail && j.Attempt == 1:
				errs[j.ID] = errPlannedFailure
			case j.Args.Snooze && j.Fence == 1:
				// The first claim only: a snooze gives the attempt back.
				errs[j.ID] = spool.Snooze(50 * time.Millisecond)
			default:
				complete = append(complete, j)
				leases = append(leases, j.Lease())
			}
		}
		if err := pause(ctx, time.Duration(jobs[0].Args.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		if len(complete) > 0 {
			err := writeEffect(ctx, leases, w.proc, func(tx any) error { return spool.CompleteManyTx(ctx, tx, complete) })
			if err != nil {
				// Their effects rolled back with their completion: they
				// fail, and run again.
				for _, j := range complete {
					errs[j.ID] = err
				}
			}
		}
		if len(errs) == 0 {
			return nil
		}
		return errs
	}
	steps := func(ctx context.Context, j *spool.Job[chaosStepsArgs]) error {
		done, err := w.start(ctx, j.JobRow)
		if err != nil {
			return err
		}
		defer done()
		for n := 1; n <= 5; n++ {
			name := durableStepName(n)
			if _, err := spool.Step(ctx, name, func(ctx context.Context) (int, error) {
				w.audit.write(fmt.Sprintf("R %d %d %s\n", j.ID, j.Fence, name))
				return n, nil
			}); err != nil {
				return err
			}
			if j.Args.SleepAfter == n {
				if err := spool.Sleep(ctx, time.Duration(j.Args.WaitMS)*time.Millisecond); err != nil {
					return err
				}
				w.audit.write(fmt.Sprintf("G %d %d sleep %d\n", j.ID, j.Fence, time.Now().UnixNano()))
			}
			if j.Args.AwaitAfter == n {
				p, err := spool.AwaitSignal(ctx, composeSignal, stepsSignalTimeout)
				if errors.Is(err, spool.ErrSignalTimeout) {
					w.audit.write(fmt.Sprintf("T %d\n", j.ID))
				}
				if err != nil {
					return err
				}
				w.audit.write(fmt.Sprintf("G %d %d signal %d\n", j.ID, j.Fence, time.Now().UnixNano()))
				var got int64
				if json.Unmarshal(p, &got) != nil || got != j.ID {
					w.audit.write(fmt.Sprintf("V %d signal payload %s, want %d\n", j.ID, p, j.ID))
				}
			}
		}
		return nil
	}
	debounced := func(ctx context.Context, j *spool.Job[chaosDebounceArgs]) error {
		done, err := w.start(ctx, j.JobRow)
		if err != nil {
			return err
		}
		defer done()
		return pause(ctx, time.Duration(j.Args.SleepMS)*time.Millisecond)
	}
	return errors.Join(
		spool.AddWorkerSafely(ws, spool.WorkFunc(task)),
		spool.AddWorkerSafely(ws, spool.WorkFunc(callback)),
		spool.AddManyWorkerSafely(ws, spool.WorkManyFunc(many), spool.ManyConfig[chaosManyArgs]{
			MaxJobs: manyMaxJobs, MaxWait: manyMaxWait,
			GroupBy: func(a chaosManyArgs) string { return fmt.Sprint(*a.Seq % 3) },
		}),
		spool.AddWorkerSafely(ws, spool.WorkFunc(steps)),
		spool.AddWorkerSafely(ws, spool.WorkFunc(debounced)),
	)
}

// Debounced inserts: every process inserts jobs of keys drawn from keys
// keys, every 5 to 45 ms, until until; the window is short beside the
// gaps between a key's inserts from all processes, so that inserts both
// move pending jobs and start new cycles beside running ones.
const (
	debounceWindow  = 60 * time.Millisecond
	debounceMaxWait = 300 * time.Millisecond
)

// debounceKey is the key of debounced key i.
func debounceKey(i int) string { return fmt.Sprintf("key-%d", i) }

// insertDebounced inserts debounced jobs until until or ctx ends; a failed
// insert (the server restarting) is not retried.
func insertDebounced(ctx context.Context, client *spool.Client, proc string, keys int, until time.Time) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(len(proc))))
	for time.Now().Before(until) && ctx.Err() == nil {
		key := debounceKey(rng.IntN(keys))
		args := chaosDebounceArgs{composeArgs{Key: key, SleepMS: rng.IntN(40)}}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = client.Insert(ictx, args, &spool.InsertOpts{Queue: composeDebounceQueue, Unique: &spool.UniqueOpts{
			Key: key, Debounce: &spool.DebounceOpts{Window: debounceWindow, MaxWait: debounceMaxWait}}})
		cancel()
		if pause(ctx, time.Duration(5+rng.IntN(40))*time.Millisecond) != nil {
			return
		}
	}
}
