package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	_ "github.com/spoolq/spool/backend/postgres" // postgres:// URLs
)

// Spool's settings for every scenario: the defaults of 'spool bench drain'
// (prefetch 1,000 had doubled drain throughput there against none, and
// 3,000 ran faster than 1,000 in alternating rounds, its claims twice as
// large: BENCHMARKS.md), completed rows kept as River keeps them.
const (
	spoolPrefetch = 3000
	spoolBatchMax = 2000
	// spoolSQLitePoll is the SQLite poll interval, as River's FetchPollInterval:
	// SQLite has no LISTEN, so a job inserted by another client waits for a poll.
	spoolSQLitePoll = 20 * time.Millisecond
)

func init() {
	registerRunner("spool", runSpool)
	registerRunner("spool-delete", runSpool)
	registerRunner("spool-sqlite", runSpool)
}

// runSpool runs a scenario with Spool, opened by URL with backend.Open.
func runSpool(ctx context.Context, spec *runSpec) (*runResult, error) {
	res := &runResult{System: spec.System, Scenario: spec.Scenario, Method: spec.Method, Version: "spool (this tree)"}
	be, err := backend.Open(ctx, spec.URL)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	if err := be.Migrate(ctx); err != nil {
		return nil, err
	}
	cfg := spoolConfig(spec)
	res.Settings = spoolSettings(cfg, spec)
	switch spec.Scenario {
	case scenarioDrain:
		err = spoolDrain(ctx, spec, be, cfg, res)
	case scenarioInsert:
		err = spoolInsert(ctx, spec, be, res)
	case scenarioSteady:
		err = spoolSteady(ctx, spec, be, cfg, res)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// openSpoolInserter opens the steady inserter's backend by URL, as another
// process would. spool_sqlite.go wraps it for SQLite files, whose backends
// in one process would otherwise share one connection and wake-ups.
var openSpoolInserter = func(ctx context.Context, spec *runSpec) (backend.Backend, error) {
	return backend.Open(ctx, spec.URL)
}

// spoolConfig is the worker client's configuration (Workers left to the
// scenario).
func spoolConfig(spec *runSpec) spool.Config {
	cfg := spool.Config{
		Queues:             map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: spec.Workers, Prefetch: spoolPrefetch}},
		CompletionBatchMax: spoolBatchMax,
		Logger:             warnLogger(),
	}
	if spec.Path != "" {
		cfg.PollInterval = spoolSQLitePoll
	}
	if spoolDeletes(spec) {
		cfg.CompletedRetention = -1
	}
	return cfg
}

// spoolDeletes reports whether the run deletes completed jobs (the work
// Graphile Worker does) instead of keeping their rows.
func spoolDeletes(spec *runSpec) bool { return spec.System == "spool-delete" }

func spoolSettings(cfg spool.Config, spec *runSpec) map[string]string {
	q := cfg.Queues[spool.DefaultQueue]
	s := map[string]string{
		"MaxWorkers":         strconv.Itoa(q.MaxWorkers),
		"Prefetch":           strconv.Itoa(q.Prefetch),
		"CompletionBatchMax": strconv.Itoa(cfg.CompletionBatchMax),
		"CompletionDelay":    "0",
		"CompletedRetention": "default (24h: rows kept)",
	}
	if spoolDeletes(spec) {
		s["CompletedRetention"] = "negative: completed jobs deleted as their completion is written"
	}
	if cfg.PollInterval != 0 {
		s["PollInterval"] = cfg.PollInterval.String()
	}
	if strings.HasPrefix(spec.URL, "postgres") {
		s["pool"] = "backend.Open default (16 conns)"
	}
	return s
}

// spoolWorkers registers the no-op handler that marks its job in h.
func spoolWorkers(h *handled) (*spool.Workers, error) {
	ws := spool.NewWorkers()
	err := spool.AddWorkerSafely(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[peerJob]) error {
		h.mark(j.Args.Seq)
		return nil
	}))
	return ws, err
}

func spoolParams(from, to int) []spool.InsertManyParams {
	p := make([]spool.InsertManyParams, to-from)
	for i := range p {
		p[i] = spool.InsertManyParams{Args: peerJob{Seq: from + i}}
	}
	return p
}

func spoolDrain(ctx context.Context, spec *runSpec, be backend.Backend, cfg spool.Config, res *runResult) error {
	h := newHandled(spec.Jobs, time.Now())
	counted, counter := countWrittenCompletions(be, int64(spec.Jobs))
	ws, err := spoolWorkers(h)
	if err != nil {
		return err
	}
	cfg.Workers = ws
	client, err := spool.NewClient(counted, &cfg)
	if err != nil {
		return err
	}
	insertTime, err := insertInChunks(ctx, spec.Jobs, spec.Chunk, func(ctx context.Context, from, to int) error {
		_, err := client.InsertMany(ctx, spoolParams(from, to))
		return err
	})
	if err != nil {
		return err
	}
	res.InsertJobsPerS = rate(spec.Jobs, insertTime)

	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	waitErr := waitProgress(ctx, counter.done, counter.written.Load, func() string {
		return fmt.Sprintf("%d of %d completions written, %d handler calls", counter.written.Load(), spec.Jobs, h.total.Load())
	})
	stopErr := stopSpool(client)
	if waitErr != nil {
		return waitErr
	}
	if stopErr != nil {
		return stopErr
	}
	elapsed := counter.doneAt.Sub(start)
	res.Jobs, res.Seconds, res.JobsPerS = spec.Jobs, elapsed.Seconds(), rate(spec.Jobs, elapsed)
	res.Duplicates, res.Expected = h.duplicates(), int64(spec.Jobs)
	res.Completed, err = spoolDone(ctx, client, spec, int64(spec.Jobs))
	return err
}

func spoolInsert(ctx context.Context, spec *runSpec, be backend.Backend, res *runResult) error {
	client, err := spool.NewClient(be, &spool.Config{Logger: warnLogger()})
	if err != nil {
		return err
	}
	chunks := make([][]spool.InsertManyParams, 0, spec.Jobs/spec.Chunk+1)
	for from := 0; from < spec.Jobs; from += spec.Chunk {
		chunks = append(chunks, spoolParams(from, min(spec.Jobs, from+spec.Chunk)))
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
	res.Stored, err = spoolCount(ctx, client)
	return err
}

func spoolSteady(ctx context.Context, spec *runSpec, be backend.Backend, cfg spool.Config, res *runResult) error {
	total, warm := spec.steadyJobs()
	base := time.Now()
	h := newHandled(total, base)
	ws, err := spoolWorkers(h)
	if err != nil {
		return err
	}
	cfg.Workers = ws
	worker, err := spool.NewClient(be, &cfg)
	if err != nil {
		return err
	}
	// The inserter is a second client on a pool of its own, as another
	// process would be: its inserts reach the worker by the store's wake-up
	// (NOTIFY) or poll, not by the in-process shortcut.
	insBackend, err := openSpoolInserter(ctx, spec)
	if err != nil {
		return err
	}
	defer insBackend.Close()
	inserter, err := spool.NewClient(insBackend, &spool.Config{Logger: warnLogger()})
	if err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	err = paceSteady(ctx, spec, h, base, total, warm, res, func(ctx context.Context, seq int) error {
		_, err := inserter.Insert(ctx, peerJob{Seq: seq}, nil)
		return err
	}, func() error { return stopSpool(worker) })
	if err != nil {
		return err
	}
	res.Completed, err = spoolDone(ctx, worker, spec, int64(total))
	return err
}

// spoolDone counts the run's jobs done: completed rows, or when completed
// jobs are deleted, the jobs of the n inserted that are gone.
func spoolDone(ctx context.Context, c *spool.Client, spec *runSpec, n int64) (int64, error) {
	if !spoolDeletes(spec) {
		return spoolCompleted(ctx, c)
	}
	left, err := spoolCount(ctx, c)
	return n - left, err
}

// stopSpool stops a client softly, writing every outcome.
func stopSpool(c *spool.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("stop spool client: %w", err)
	}
	return nil
}

// spoolCompleted counts the completed jobs of the default queue, by the
// store's own counts.
func spoolCompleted(ctx context.Context, c *spool.Client) (int64, error) {
	stats, err := c.QueueStats(ctx)
	if err != nil {
		return 0, fmt.Errorf("count completed jobs: %w", err)
	}
	for _, s := range stats {
		if s.Queue == spool.DefaultQueue {
			return s.Counts[backend.StateCompleted], nil
		}
	}
	return 0, nil
}

// spoolCount counts every job of the default queue, whatever its state.
func spoolCount(ctx context.Context, c *spool.Client) (int64, error) {
	stats, err := c.QueueStats(ctx)
	if err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	var n int64
	for _, s := range stats {
		if s.Queue == spool.DefaultQueue {
			for _, c := range s.Counts {
				n += c
			}
		}
	}
	return n, nil
}
