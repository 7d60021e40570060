package spool_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// handoverBackend is a memory store that declares
// backend.OutcomeStepWriter: it writes the step records an outcome carries
// before the outcome, and notes which records came by a record batch and
// which with an outcome. Its first record batch waits for release, after
// entered is closed, and is refused when refuse is set.
type handoverBackend struct {
	*memory.Backend
	refuse            bool
	entered, release  chan struct{}
	finished          chan int64 // the jobs whose outcome was written
	once              sync.Once
	mu                sync.Mutex
	batched, withOutc []string
}

func (b *handoverBackend) WritesOutcomeSteps() bool { return true }

func (b *handoverBackend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	first := false
	b.once.Do(func() { first = true })
	b.mu.Lock()
	for _, s := range p.Steps {
		b.batched = append(b.batched, s.Name)
	}
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
		if b.refuse {
			return make([]backend.StepRecordResult, len(p.Steps)), nil
		}
	}
	return b.Backend.StepRecordMany(ctx, p)
}

func (b *handoverBackend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	var steps []backend.StepRecordParams
	for _, f := range p.Finishes {
		steps = append(steps, f.Steps...)
	}
	if len(steps) > 0 {
		b.mu.Lock()
		for _, s := range steps {
			b.withOutc = append(b.withOutc, s.Name)
		}
		b.mu.Unlock()
		if _, err := b.Backend.StepRecordMany(ctx, &backend.StepRecordManyParams{Steps: steps}); err != nil {
			return nil, err
		}
	}
	res, err := b.Backend.JobFinishMany(ctx, p)
	if err == nil {
		for _, f := range p.Finishes {
			b.finished <- f.Lease.ID
		}
	}
	return res, err
}

// startOneWorker starts a client of one worker over be and inserts one
// handoverArgs job; the client stops at the test's end.
func startOneWorker(t *testing.T, be backend.Backend, ws *spool.Workers) (*spool.Client, *spool.InsertResult) {
	t.Helper()
	ctx := context.Background()
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		PollInterval: 20 * time.Millisecond, LeaseDuration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	res, err := c.Insert(ctx, handoverArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

type handoverArgs struct {
	Release bool `json:"release,omitempty"`
}

func (handoverArgs) Kind() string { return "handover" }

// TestStepsHandedToOutcome: on a store that writes records with outcomes,
// a run's records that no batch took before its handler returned go with
// its outcome, after the one a batch took (still in flight when the
// handler returned) was written; when that one is refused, none is
// handed over, so the records a run leaves stay the first of its steps.
func TestStepsHandedToOutcome(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			ctx := context.Background()
			be := &handoverBackend{Backend: memory.New(), refuse: refuse, entered: make(chan struct{}), release: make(chan struct{}),
				finished: make(chan int64, 10)}
			done := make(chan int64, 2)
			ws := spool.NewWorkers()
			spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[handoverArgs]) error {
				if j.Args.Release {
					// This job runs only once the first one's run has
					// ended, so its records were handed over already.
					close(be.release)
					done <- j.ID
					return nil
				}
				for i := 1; i <= 5; i++ {
					if _, err := spool.Step(ctx, fmt.Sprintf("s%d", i), func(ctx context.Context) (int, error) { return i, nil }); err != nil {
						return err
					}
					if i == 1 {
						<-be.entered // s1 is in flight; s2… queue behind it
					}
				}
				done <- j.ID
				return nil
			}))
			c, res := startOneWorker(t, be, ws)
			<-be.entered
			if _, err := c.Insert(ctx, handoverArgs{Release: true}, nil); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the jobs did not run")
				}
			}
			for id := int64(0); id != res.ID; {
				select {
				case id = <-be.finished:
				case <-time.After(10 * time.Second):
					t.Fatal("the first job's outcome was not written")
				}
			}
			if j, err := c.JobGet(ctx, res.ID); err != nil || j.State != spool.JobStateCompleted {
				t.Fatalf("job %d: %+v, %v, want completed", res.ID, j, err)
			}
			d, err := c.JobDurable(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range d.Steps {
				names = append(names, s.Name)
			}
			be.mu.Lock()
			defer be.mu.Unlock()
			wantRecorded, wantCarried := []string{"s1", "s2", "s3", "s4", "s5"}, []string{"s2", "s3", "s4", "s5"}
			if refuse {
				wantRecorded, wantCarried = nil, nil
			}
			if !slices.Equal(be.batched, []string{"s1"}) || !slices.Equal(be.withOutc, wantCarried) || !slices.Equal(names, wantRecorded) {
				t.Fatalf("records by batch %v, with the outcome %v, recorded %v; want [s1], %v, %v", be.batched, be.withOutc, names, wantCarried, wantRecorded)
			}
		})
	}
}

// completeTxBackend is a memory store whose first step record batch waits
// for release (after closing entered), and which notes a completion in a
// caller's transaction that came while a record batch was in flight.
type completeTxBackend struct {
	*memory.Backend
	entered, release chan struct{}
	enterOnce        sync.Once
	releaseOnce      sync.Once
	inFlight         atomic.Int32
	finishedEarly    atomic.Bool
}

func (b *completeTxBackend) doRelease() { b.releaseOnce.Do(func() { close(b.release) }) }

func (b *completeTxBackend) StepRecordMany(ctx context.Context, p *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	b.enterOnce.Do(func() {
		close(b.entered)
		<-b.release
	})
	return b.Backend.StepRecordMany(ctx, p)
}

func (b *completeTxBackend) JobFinishMany(ctx context.Context, p *backend.JobFinishManyParams) (*backend.JobFinishManyResult, error) {
	if p.Tx != nil && b.inFlight.Load() > 0 {
		b.finishedEarly.Store(true)
		b.doRelease() // let the batch go, so that the run ends either way
	}
	return b.Backend.JobFinishMany(ctx, p)
}

// TestCompleteTxWaitsForStepRecords: a completion in the caller's
// transaction is written only after the run's step records in flight: the
// completed job shows its step. (Before, the completion committed first
// and the record, written after, was refused: its lease had ended.)
func TestCompleteTxWaitsForStepRecords(t *testing.T) {
	ctx := context.Background()
	be := &completeTxBackend{Backend: memory.New(), entered: make(chan struct{}), release: make(chan struct{})}
	// CompleteTx waiting for the record in flight is what lets it go.
	spool.SetSettleWaiting(be.doRelease)
	t.Cleanup(func() { spool.SetSettleWaiting(nil) })
	done := make(chan error, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[handoverArgs]) error {
		if _, err := spool.Step(ctx, "s1", func(ctx context.Context) (int, error) { return 1, nil }); err != nil {
			done <- err
			return err
		}
		<-be.entered // s1's batch is in flight
		tx := be.Begin()
		if err := spool.CompleteTx(ctx, tx, j); err != nil {
			_ = tx.Rollback(ctx)
			done <- err
			return err
		}
		err := tx.Commit(ctx)
		done <- err
		return err
	}))
	c, res := startOneWorker(t, be, ws)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("handler: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run")
	}
	if be.finishedEarly.Load() {
		t.Fatal("CompleteTx wrote the completion while the run's step record was in flight")
	}
	if j, err := c.JobGet(ctx, res.ID); err != nil || j.State != spool.JobStateCompleted {
		t.Fatalf("job %d: %+v, %v, want completed", res.ID, j, err)
	}
	d, err := c.JobDurable(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != 1 || d.Steps[0].Name != "s1" {
		t.Fatalf("steps of the completed job: %+v, want s1", d.Steps)
	}
}
