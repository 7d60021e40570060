package main

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
)

// River's fetch settings for every scenario: the values River's own
// benchmark (cmd/river/riverbench) uses "to maximize job throughput"; the
// defaults are 100 ms and 1 s. The cooldown also paces River's insert
// notifications, so the inserting client gets it too.
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// riverStore is a River driver over a fresh store, with what the runner
// needs besides the driver.
type riverStore[TTx any] struct {
	driver riverdriver.Driver[TTx]
	// count runs a SELECT count(*) … and returns the count.
	count func(ctx context.Context, query string) (int64, error)
	// settings describe the connection pool.
	settings map[string]string
	close    func()
}

// riverOpener opens a fresh store for River (called once per client, so
// the steady scenario's inserter gets a pool of its own).
type riverOpener[TTx any] func(ctx context.Context, spec *runSpec) (*riverStore[TTx], error)

// runRiver runs a scenario with River over the driver open returns.
func runRiver[TTx any](ctx context.Context, spec *runSpec, open riverOpener[TTx], version string) (*runResult, error) {
	st, err := open(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer st.close()
	migrator, err := rivermigrate.New(st.driver, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	res := &runResult{System: spec.System, Scenario: spec.Scenario, Method: spec.Method, Version: version, Settings: map[string]string{}}
	maps.Copy(res.Settings, st.settings)
	switch spec.Scenario {
	case scenarioDrain:
		err = riverDrain(ctx, spec, st, res)
	case scenarioInsert:
		err = riverInsert(ctx, spec, st, res)
	case scenarioSteady:
		err = riverSteady(ctx, spec, st, open, res)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// riverWorkerConfig is the working client's configuration.
func riverWorkerConfig(spec *runSpec, h *handled, res *runResult) (*river.Config, error) {
	ws := river.NewWorkers()
	if err := river.AddWorkerSafely(ws, river.WorkFunc(func(_ context.Context, j *river.Job[peerJob]) error {
		h.mark(j.Args.Seq)
		return nil
	})); err != nil {
		return nil, err
	}
	res.Settings["MaxWorkers"] = strconv.Itoa(spec.Workers)
	res.Settings["FetchCooldown"] = riverFetchCooldown.String()
	res.Settings["FetchPollInterval"] = riverFetchPollInterval.String()
	res.Settings["CompletedJobRetentionPeriod"] = "default (24h: rows kept)"
	return &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            warnLogger(),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: spec.Workers}},
		Workers:           ws,
	}, nil
}

func riverParams(from, to int) []river.InsertManyParams {
	p := make([]river.InsertManyParams, to-from)
	for i := range p {
		p[i] = river.InsertManyParams{Args: peerJob{Seq: from + i}}
	}
	return p
}

// riverEvents counts River's completed events: River emits one for each row
// its completion statement returned, after the write, so the count is of
// written completions. Any failed or cancelled job is an error of the run.
type riverEvents struct {
	completed atomic.Int64
	failed    atomic.Int64
	done      chan struct{}
	doneAt    time.Time // set before done is closed
}

func countRiverEvents[TTx any](client *river.Client[TTx], target int) (*riverEvents, func()) {
	ch, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: target + 1000, // never full: a dropped event would stall the count
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	ev := &riverEvents{done: make(chan struct{})}
	go func() {
		for e := range ch {
			if e.Kind != river.EventKindJobCompleted {
				ev.failed.Add(1)
				continue
			}
			if ev.completed.Add(1) == int64(target) {
				ev.doneAt = time.Now()
				close(ev.done)
			}
		}
	}()
	return ev, cancel
}

func riverDrain[TTx any](ctx context.Context, spec *runSpec, st *riverStore[TTx], res *runResult) error {
	h := newHandled(spec.Jobs, time.Now())
	cfg, err := riverWorkerConfig(spec, h, res)
	if err != nil {
		return err
	}
	client, err := river.NewClient(st.driver, cfg)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	ev, unsubscribe := countRiverEvents(client, spec.Jobs)
	defer unsubscribe()
	insertTime, err := insertInChunks(ctx, spec.Jobs, spec.Chunk, func(ctx context.Context, from, to int) error {
		_, err := client.InsertMany(ctx, riverParams(from, to))
		return err
	})
	if err != nil {
		return err
	}
	res.InsertJobsPerS = rate(spec.Jobs, insertTime)

	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start river client: %w", err)
	}
	waitErr := waitProgress(ctx, ev.done, ev.completed.Load, func() string {
		return fmt.Sprintf("%d of %d completed events, %d failed or cancelled, %d handler calls",
			ev.completed.Load(), spec.Jobs, ev.failed.Load(), h.total.Load())
	})
	stopErr := stopRiver(client)
	if waitErr != nil {
		return waitErr
	}
	if stopErr != nil {
		return stopErr
	}
	elapsed := ev.doneAt.Sub(start)
	res.Jobs, res.Seconds, res.JobsPerS = spec.Jobs, elapsed.Seconds(), rate(spec.Jobs, elapsed)
	res.Duplicates, res.Expected = h.duplicates(), int64(spec.Jobs)
	res.Completed, err = st.count(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`)
	return err
}

func riverInsert[TTx any](ctx context.Context, spec *runSpec, st *riverStore[TTx], res *runResult) error {
	client, err := river.NewClient(st.driver, &river.Config{Logger: warnLogger()})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	chunks := make([][]river.InsertManyParams, 0, spec.Jobs/spec.Chunk+1)
	for from := 0; from < spec.Jobs; from += spec.Chunk {
		chunks = append(chunks, riverParams(from, min(spec.Jobs, from+spec.Chunk)))
	}
	elapsed, err := insertInChunks(ctx, spec.Jobs, spec.Chunk, func(ctx context.Context, from, _ int) error {
		params := chunks[from/spec.Chunk]
		if spec.Method == methodFast {
			_, err := client.InsertManyFast(ctx, params)
			return err
		}
		_, err := client.InsertMany(ctx, params)
		return err
	})
	if err != nil {
		return err
	}
	res.Jobs, res.Seconds, res.JobsPerS = spec.Jobs, elapsed.Seconds(), rate(spec.Jobs, elapsed)
	res.Settings["method"] = map[string]string{methodMany: "InsertMany", methodFast: "InsertManyFast"}[spec.Method]
	res.Settings["chunk"] = strconv.Itoa(spec.Chunk)
	res.Expected = int64(spec.Jobs)
	res.Stored, err = st.count(ctx, `SELECT count(*) FROM river_job`)
	return err
}

func riverSteady[TTx any](ctx context.Context, spec *runSpec, st *riverStore[TTx], open riverOpener[TTx], res *runResult) error {
	total, warm := spec.steadyJobs()
	base := time.Now()
	h := newHandled(total, base)
	cfg, err := riverWorkerConfig(spec, h, res)
	if err != nil {
		return err
	}
	worker, err := river.NewClient(st.driver, cfg)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	// A second, insert-only client on a pool of its own, as another process
	// would be; it shares the fetch cooldown, which paces its notifications.
	ins, err := open(ctx, spec)
	if err != nil {
		return err
	}
	defer ins.close()
	inserter, err := river.NewClient(ins.driver, &river.Config{FetchCooldown: riverFetchCooldown, Logger: warnLogger()})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	if err := worker.Start(ctx); err != nil {
		return fmt.Errorf("start river client: %w", err)
	}
	err = paceSteady(ctx, spec, h, base, total, warm, res, func(ctx context.Context, seq int) error {
		_, err := inserter.Insert(ctx, peerJob{Seq: seq}, nil)
		return err
	}, func() error { return stopRiver(worker) })
	if err != nil {
		return err
	}
	res.Completed, err = st.count(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`)
	return err
}

// stopRiver stops a client softly, letting its completer write every outcome.
func stopRiver[TTx any](c *river.Client[TTx]) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("stop river client: %w", err)
	}
	return nil
}
