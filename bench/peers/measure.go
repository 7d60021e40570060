package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// peerJob is the args of the benchmark's jobs, for Spool and River alike.
type peerJob struct {
	Seq int `json:"seq"`
}

// Kind implements spool.JobArgs and river.JobArgs.
func (peerJob) Kind() string { return jobKind }

// handled records which jobs a handler ran and when each first started, by
// the job's seq.
type handled struct {
	base     time.Time
	calls    []atomic.Int32
	startNS  []atomic.Int64 // since base; 0: not started
	total    atomic.Int64   // handler calls
	distinct atomic.Int64   // jobs run at least once
	all      chan struct{}  // closed when every job has run once
	once     sync.Once
}

func newHandled(n int, base time.Time) *handled {
	return &handled{base: base, calls: make([]atomic.Int32, n), startNS: make([]atomic.Int64, n), all: make(chan struct{})}
}

// mark records a handler call for seq. A seq out of range is counted as a
// duplicate: it is not one of this run's jobs.
func (h *handled) mark(seq int) {
	h.total.Add(1)
	if seq < 0 || seq >= len(h.calls) || h.calls[seq].Add(1) != 1 {
		return
	}
	h.startNS[seq].Store(max(1, int64(time.Since(h.base))))
	if h.distinct.Add(1) == int64(len(h.calls)) {
		h.once.Do(func() { close(h.all) })
	}
}

// duplicates counts handler calls beyond the first per job (and calls for
// jobs that are not this run's).
func (h *handled) duplicates() int64 { return h.total.Load() - h.distinct.Load() }

// insertInChunks calls insert for consecutive ranges [from, to) of n jobs,
// chunk at a time, and returns the time spent in those calls.
func insertInChunks(ctx context.Context, n, chunk int, insert func(ctx context.Context, from, to int) error) (time.Duration, error) {
	start := time.Now()
	for from := 0; from < n; from += chunk {
		if err := insert(ctx, from, min(n, from+chunk)); err != nil {
			return 0, fmt.Errorf("insert jobs %d..%d: %w", from, min(n, from+chunk), err)
		}
	}
	return time.Since(start), nil
}

// rate returns n per second of d.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// stallLimit is how long a run may go without progress before it fails.
const stallLimit = 30 * time.Second

// waitProgress waits until done is closed. It fails when ctx ends or when
// progress() has not changed for stallLimit, with describe()'s account.
func waitProgress(ctx context.Context, done <-chan struct{}, progress func() int64, describe func() string) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := progress(), time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %s: %w", describe(), context.Cause(ctx))
		case now := <-tick.C:
			if p := progress(); p != last {
				last, lastChange = p, now
			} else if now.Sub(lastChange) > stallLimit {
				return fmt.Errorf("no progress for %s: %s", stallLimit, describe())
			}
		}
	}
}

// pacer inserts jobs 0..n-1 at a fixed rate, job i due at start + i/rate,
// each by its own call to insert, with at most inflight calls at once (an
// open loop: a slow insert does not delay the next ones' due times). It
// records each job's commit time, the moment its insert call returned.
type pacer struct {
	base     time.Time
	commitNS []atomic.Int64 // since base
}

// run inserts the jobs and returns the achieved rate over the whole run.
func (p *pacer) run(ctx context.Context, n int, perSecond float64, inflight int, insert func(ctx context.Context, seq int) error) (float64, error) {
	p.commitNS = make([]atomic.Int64, n)
	interval := time.Duration(float64(time.Second) / perSecond)
	sem := make(chan struct{}, inflight)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(seq int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := insert(ctx, seq); err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("insert job %d: %w", seq, err); cancel() })
				return
			}
			p.commitNS[seq].Store(int64(time.Since(p.base)))
		}(i)
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return rate(n, time.Since(start)), nil
}

// errNotPicked means a steady job was inserted but never started.
var errNotPicked = errors.New("job inserted but never started")

// pickupLatencies returns insert-commit-to-start latencies, in milliseconds,
// of jobs warm..n-1.
func pickupLatencies(commitNS, startNS []atomic.Int64, warm int) ([]float64, error) {
	out := make([]float64, 0, len(commitNS)-warm)
	for i := warm; i < len(commitNS); i++ {
		c, s := commitNS[i].Load(), startNS[i].Load()
		if s == 0 {
			return nil, fmt.Errorf("job %d: %w", i, errNotPicked)
		}
		out = append(out, float64(s-c)/1e6)
	}
	return out, nil
}

// summarize returns percentiles of latencies (milliseconds), nearest rank.
func summarize(latencies []float64) *latencySummary {
	if len(latencies) == 0 {
		return &latencySummary{}
	}
	s := slices.Clone(latencies)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return &latencySummary{P50: at(0.50), P95: at(0.95), P99: at(0.99), P999: at(0.999), Max: s[len(s)-1], Samples: len(s)}
}

// paceSteady runs the steady scenario's load once the worker has started:
// insert is called once per job, paced at spec.Rate; then it waits until
// every job has started, stops the worker with stop, and fills res with the
// pickup latencies (the first warm jobs left out) and the counts.
func paceSteady(ctx context.Context, spec *runSpec, h *handled, base time.Time, total, warm int, res *runResult,
	insert func(ctx context.Context, seq int) error, stop func() error) error {
	p := &pacer{base: base}
	achieved, err := p.run(ctx, total, spec.Rate, spec.Inflight, insert)
	if err == nil {
		err = waitProgress(ctx, h.all, h.distinct.Load, func() string {
			return fmt.Sprintf("%d of %d jobs started", h.distinct.Load(), total)
		})
	}
	stopErr := stop()
	if err != nil {
		return err
	}
	if stopErr != nil {
		return stopErr
	}
	lat, err := pickupLatencies(p.commitNS, h.startNS, warm)
	if err != nil {
		return err
	}
	res.Jobs, res.Latency, res.AchievedRate = len(lat), summarize(lat), achieved
	res.Duplicates, res.Expected = h.duplicates(), int64(total)
	res.Settings["inserter"] = fmt.Sprintf("second client, own pool; Insert per job, ≤%d in flight", spec.Inflight)
	return nil
}
