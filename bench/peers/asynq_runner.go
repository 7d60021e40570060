//go:build !riversqlite

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynq's task check interval, 1 ms, its best for latency (default 1 s),
// and the queue the benchmark uses. Its concurrency is asynqConcurrency.
const (
	asynqTaskCheckInterval = time.Millisecond
	asynqQueue             = "default"
)

func init() {
	moreStores[storeRedis] = func(m *storeMaker, ctx context.Context, name string) (*freshStore, error) {
		return m.newRedis(ctx, name)
	}
	moreStores[storeRedisDurable] = func(m *storeMaker, ctx context.Context, name string) (*freshStore, error) {
		return m.newDurableRedis(ctx, name)
	}
	registerRunner("asynq", runAsynq)
	registerRunner("asynq-durable", runAsynq)
}

// runAsynq runs a scenario with asynq on the Redis of spec.URL.
func runAsynq(ctx context.Context, spec *runSpec) (*runResult, error) {
	opt, err := redis.ParseURL(spec.URL)
	if err != nil {
		return nil, fmt.Errorf("asynq: %w", err)
	}
	conn := asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, PoolSize: asyncInserts}
	res := &runResult{System: spec.System, Scenario: spec.Scenario, Method: spec.Method,
		Version: "asynq " + moduleVersion("github.com/hibiken/asynq"), Settings: map[string]string{}}
	res.Settings["redis"] = spec.URL
	if spec.System == "asynq-durable" {
		res.Settings["redis"] += " (own server: appendonly yes, appendfsync always)"
	} else {
		res.Settings["redis"] += " (the shared server, as configured: no persistence)"
	}
	inspector := asynq.NewInspector(conn)
	defer inspector.Close()
	switch spec.Scenario {
	case scenarioDrain:
		err = asynqDrain(ctx, spec, conn, inspector, res)
	case scenarioInsert:
		err = asynqInsert(ctx, spec, conn, inspector, res)
	case scenarioSteady:
		err = asynqSteady(ctx, spec, conn, inspector, res)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func asynqTask(seq int) *asynq.Task {
	b, _ := json.Marshal(peerJob{Seq: seq})
	return asynq.NewTask(jobKind, b)
}

// asynqServer is the working server, its handler marking each task in h.
func asynqServer(spec *runSpec, conn asynq.RedisClientOpt, h *handled, res *runResult) (*asynq.Server, *asynq.ServeMux) {
	res.Settings["Concurrency"] = strconv.Itoa(spec.Workers)
	res.Settings["TaskCheckInterval"] = asynqTaskCheckInterval.String()
	res.Settings["completed tasks"] = "deleted (no Retention, the default)"
	srv := asynq.NewServer(conn, asynq.Config{
		Concurrency:       spec.Workers,
		TaskCheckInterval: asynqTaskCheckInterval,
		Queues:            map[string]int{asynqQueue: 1},
		LogLevel:          asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(jobKind, func(_ context.Context, t *asynq.Task) error {
		var j peerJob
		if err := json.Unmarshal(t.Payload(), &j); err != nil {
			return err
		}
		h.mark(j.Seq)
		return nil
	})
	return srv, mux
}

// enqueueRange inserts tasks from..to-1, one Enqueue call each, asyncInserts
// calls at once.
func enqueueRange(ctx context.Context, c *asynq.Client, from, to int) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	next := make(chan int)
	for range asyncInserts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range next {
				if _, err := c.EnqueueContext(ctx, asynqTask(seq), asynq.Queue(asynqQueue)); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for seq := from; seq < to; seq++ {
		next <- seq
	}
	close(next)
	wg.Wait()
	return first
}

// asynqDone counts the tasks asynq completed: processed minus failed.
func asynqDone(inspector *asynq.Inspector) (done, pending, active int64, err error) {
	qi, err := inspector.GetQueueInfo(asynqQueue)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("asynq queue info: %w", err)
	}
	return int64(qi.ProcessedTotal - qi.FailedTotal), int64(qi.Pending), int64(qi.Active), nil
}

// enqueueAll inserts the spec's jobs, chunk by chunk, and returns the time
// spent in the calls.
func enqueueAll(ctx context.Context, spec *runSpec, conn asynq.RedisClientOpt) (time.Duration, error) {
	client := asynq.NewClient(conn)
	defer client.Close()
	return insertInChunks(ctx, spec.Jobs, spec.Chunk, func(ctx context.Context, from, to int) error {
		return enqueueRange(ctx, client, from, to)
	})
}

func asynqDrain(ctx context.Context, spec *runSpec, conn asynq.RedisClientOpt, inspector *asynq.Inspector, res *runResult) error {
	insertTime, err := enqueueAll(ctx, spec, conn)
	if err != nil {
		return err
	}
	res.InsertJobsPerS = rate(spec.Jobs, insertTime)

	h := newHandled(spec.Jobs, time.Now())
	srv, mux := asynqServer(spec, conn, h, res)
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	err = waitProgress(ctx, h.all, h.distinct.Load, func() string {
		return fmt.Sprintf("%d of %d tasks handled", h.distinct.Load(), spec.Jobs)
	})
	// Every handler has run; the clock stops when asynq has also written
	// each one done (the task gone from the active list).
	var doneAt time.Time
	for err == nil {
		var pending, active int64
		if _, pending, active, err = asynqDone(inspector); err == nil && pending == 0 && active == 0 {
			doneAt = time.Now()
			break
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	srv.Shutdown()
	if err != nil {
		return err
	}
	elapsed := doneAt.Sub(start)
	res.Jobs, res.Seconds, res.JobsPerS = spec.Jobs, elapsed.Seconds(), rate(spec.Jobs, elapsed)
	res.Duplicates, res.Expected = h.duplicates(), int64(spec.Jobs)
	res.Completed, _, _, err = asynqDone(inspector)
	return err
}

func asynqInsert(ctx context.Context, spec *runSpec, conn asynq.RedisClientOpt, inspector *asynq.Inspector, res *runResult) error {
	elapsed, err := enqueueAll(ctx, spec, conn)
	if err != nil {
		return err
	}
	res.Jobs, res.Seconds, res.JobsPerS = spec.Jobs, elapsed.Seconds(), rate(spec.Jobs, elapsed)
	res.Settings["method"] = fmt.Sprintf("Client.Enqueue, one task a call, %d calls at once (no bulk insert in asynq)", asyncInserts)
	res.Expected = int64(spec.Jobs)
	qi, err := inspector.GetQueueInfo(asynqQueue)
	if err != nil {
		return fmt.Errorf("asynq queue info: %w", err)
	}
	res.Stored = int64(qi.Pending)
	return nil
}

func asynqSteady(ctx context.Context, spec *runSpec, conn asynq.RedisClientOpt, inspector *asynq.Inspector, res *runResult) error {
	total, warm := spec.steadyJobs()
	base := time.Now()
	h := newHandled(total, base)
	srv, mux := asynqServer(spec, conn, h, res)
	// The inserter has a client, and so a connection pool, of its own, as
	// another process would.
	inserter := asynq.NewClient(conn)
	defer inserter.Close()
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	err := paceSteady(ctx, spec, h, base, total, warm, res, func(ctx context.Context, seq int) error {
		_, err := inserter.EnqueueContext(ctx, asynqTask(seq), asynq.Queue(asynqQueue))
		return err
	}, func() error { srv.Shutdown(); return nil })
	if err != nil {
		return err
	}
	res.Completed, _, _, err = asynqDone(inspector)
	return err
}
