// Package spoolprom exports Spool's metrics to Prometheus: what a client
// does (inserts, claims, starts, outcomes, run and pickup times, lost
// leases, rescues, the notifier's state) as an spool.Observer, and what the
// store holds (jobs by queue and state, the age of the oldest waiting and
// running job) read at scrape time.
//
//	m := spoolprom.New(nil)
//	prometheus.MustRegister(m)
//	client, err := spool.NewClient(be, &spool.Config{Observers: []spool.Observer{m}, …})
//	m.WatchStore(client) // optional: queue depth and ages, from the store
//
// It is a module of its own, so that Spool's core requires nothing.
package spoolprom

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// Options configure the metrics. The zero value is the default.
type Options struct {
	// Namespace prefixes every metric name (default "spool").
	Namespace string
	// StoreInterval is the least time between two reads of the store's
	// counts (default 15 s): counting every job by queue and state reads
	// the whole table, too much for every scrape of every replica.
	StoreInterval time.Duration
	// StoreTimeout bounds one read of the store (default 10 s).
	StoreTimeout time.Duration
}

// Metrics is a prometheus.Collector and a spool.Observer.
type Metrics struct {
	spool.NopObserver
	opts Options

	inserted, started, finished       *prometheus.CounterVec
	claims                            *prometheus.CounterVec
	claimSeconds, pickupSeconds       *prometheus.HistogramVec
	runSeconds                        *prometheus.HistogramVec
	leasesLost                        *prometheus.CounterVec
	rescued                           *prometheus.CounterVec
	notifierUp                        prometheus.Gauge
	queueJobs, oldestAge, storeError  *prometheus.Desc
	workflows, workflowTasks, batches *prometheus.Desc
	deadlocks, storeAge               *prometheus.Desc

	client atomic.Pointer[spool.Client]
	// notifierSeen: NotifierUp was called; until then notifier_up is not
	// exported (a backend without notifications polls by design).
	notifierSeen atomic.Bool
	// storeMu serializes reads of the store (scrapes wait for one); the
	// observer methods never take it, so they never wait for the store.
	storeMu sync.Mutex
	store   storeRead // last read of the store
}

// storeRead is one read of the store's counts.
type storeRead struct {
	at     time.Time
	err    error
	counts []backend.QueueStats
	oldest map[[2]string]time.Duration // (queue, state) -> age
	// workflows counts the newest workflowsRead workflows as running or
	// final, tasks their tasks by state, batches the newest batches as
	// open, running or finished.
	workflows map[string]int
	tasks     map[backend.State]int64
	batches   map[string]int
}

// workflowsRead is how many of the newest workflows, and of the newest
// batches, a store read counts.
const workflowsRead = 1000

// New returns the metrics.
func New(opts *Options) *Metrics {
	m := &Metrics{}
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.Namespace == "" {
		m.opts.Namespace = "spool"
	}
	if m.opts.StoreInterval <= 0 {
		m.opts.StoreInterval = 15 * time.Second
	}
	if m.opts.StoreTimeout <= 0 {
		m.opts.StoreTimeout = 10 * time.Second
	}
	ns := m.opts.Namespace
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	hist := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
	}
	m.inserted = counter("jobs_inserted_total", "Jobs written by this process's insert statements.", "queue", "kind")
	m.started = counter("jobs_started_total", "Handler runs started by this process.", "queue", "kind")
	m.finished = counter("jobs_finished_total", "Outcomes of handler runs written to the store, by outcome: completed, failed (to be retried), discarded, cancelled, snoozed.", "queue", "kind", "outcome")
	m.claims = counter("claims_total", "Claims made by this process, by result (ok or error).", "queue", "result")
	m.claimSeconds = hist("claim_duration_seconds", "Time a claim took, from its request to its jobs.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "queue")
	m.pickupSeconds = hist("job_pickup_seconds", "Time from a job's run time (when it became due) to its handler's start.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}, "queue")
	m.runSeconds = hist("job_run_seconds", "Time a handler ran.",
		[]float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}, "queue", "kind")
	m.leasesLost = counter("leases_lost_total", "Running jobs whose lease this process lost (cancelled, or rescued elsewhere after a stall); their handlers were cancelled.", "queue")
	m.rescued = counter("jobs_rescued_total", "Jobs whose lease had ended, made to run again (retried) or discarded (no attempt left) by this process as maintenance leader.", "result")
	m.notifierUp = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "notifier_up",
		Help: "1 while the wake-up subscription is in place, 0 while the process polls until it is back."})
	m.queueJobs = prometheus.NewDesc(ns+"_queue_jobs", "Jobs in the store by queue and state (read at most every StoreInterval).", []string{"queue", "state"}, nil)
	m.oldestAge = prometheus.NewDesc(ns+"_queue_oldest_job_age_seconds",
		"Age of the oldest job of a queue in a state, by id: for available jobs since they became due, for running ones since their attempt started.", []string{"queue", "state"}, nil)
	m.storeError = prometheus.NewDesc(ns+"_store_read_errors", "1 when the last read of the store's counts failed (the counts are then the last good ones).", nil, nil)
	m.storeAge = prometheus.NewDesc(ns+"_store_read_age_seconds", "Age of the store counts served.", nil, nil)
	m.deadlocks = prometheus.NewDesc(ns+"_deadlock_retries_total", "Transactions the backend retried after a deadlock or a lock wait timeout (MySQL).", nil, nil)
	m.workflows = prometheus.NewDesc(ns+"_workflows", "The newest 1,000 workflows by status: running (a task not final) or final.", []string{"status"}, nil)
	m.workflowTasks = prometheus.NewDesc(ns+"_workflow_tasks", "Tasks of the newest 1,000 workflows by state.", []string{"state"}, nil)
	m.batches = prometheus.NewDesc(ns+"_batches", "The newest 1,000 batches by status: open, running (sealed, a member not final) or finished.", []string{"status"}, nil)
	return m
}

// WatchStore makes each scrape report the store's jobs by queue and state
// and the age of each queue's oldest available and running job, read
// through client at most every StoreInterval, and the backend's deadlock
// retries where it counts them.
func (m *Metrics) WatchStore(client *spool.Client) {
	m.client.Store(client)
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.inserted, m.started, m.finished, m.claims, m.claimSeconds, m.pickupSeconds,
		m.runSeconds, m.leasesLost, m.rescued}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	m.notifierUp.Describe(ch)
	for _, d := range []*prometheus.Desc{m.queueJobs, m.oldestAge, m.storeError, m.storeAge, m.deadlocks, m.workflows, m.workflowTasks, m.batches} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	client := m.client.Load()
	if m.notifierSeen.Load() {
		m.notifierUp.Collect(ch)
	}
	if client == nil {
		return
	}
	if dc, ok := client.Backend().(backend.DeadlockCounter); ok {
		ch <- prometheus.MustNewConstMetric(m.deadlocks, prometheus.CounterValue, float64(dc.DeadlockRetries()))
	}
	read := m.readStore(client)
	for _, q := range read.counts {
		for _, st := range backend.AllStates {
			ch <- prometheus.MustNewConstMetric(m.queueJobs, prometheus.GaugeValue, float64(q.Counts[st]), q.Queue, string(st))
		}
	}
	for k, age := range read.oldest {
		ch <- prometheus.MustNewConstMetric(m.oldestAge, prometheus.GaugeValue, age.Seconds(), k[0], k[1])
	}
	if read.workflows != nil {
		for _, s := range []string{"running", "final"} {
			ch <- prometheus.MustNewConstMetric(m.workflows, prometheus.GaugeValue, float64(read.workflows[s]), s)
		}
		for _, st := range backend.AllStates {
			ch <- prometheus.MustNewConstMetric(m.workflowTasks, prometheus.GaugeValue, float64(read.tasks[st]), string(st))
		}
		for _, s := range []string{"open", "running", "finished"} {
			ch <- prometheus.MustNewConstMetric(m.batches, prometheus.GaugeValue, float64(read.batches[s]), s)
		}
	}
	failed := 0.0
	if read.err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(m.storeError, prometheus.GaugeValue, failed)
	if !read.at.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.storeAge, prometheus.GaugeValue, time.Since(read.at).Seconds())
	}
}

// readStore returns the store's counts, read again when the last read is
// older than StoreInterval. Concurrent scrapes wait for one read.
func (m *Metrics) readStore(client *spool.Client) storeRead {
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	if !m.store.at.IsZero() && time.Since(m.store.at) < m.opts.StoreInterval && m.store.err == nil {
		return m.store
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.StoreTimeout)
	defer cancel()
	read, err := readCounts(ctx, client)
	if err != nil {
		// Keep serving the last good counts, and say the read failed.
		m.store.err = err
		return m.store
	}
	m.store = read
	return m.store
}

func readCounts(ctx context.Context, client *spool.Client) (storeRead, error) {
	counts, err := client.QueueStats(ctx)
	if err != nil {
		return storeRead{}, err
	}
	read := storeRead{at: time.Now(), counts: counts, oldest: map[[2]string]time.Duration{}}
	for _, q := range counts {
		for _, st := range []backend.State{backend.StateAvailable, backend.StateRunning} {
			if q.Counts[st] == 0 {
				continue
			}
			rows, err := client.JobList(ctx, &spool.JobListParams{Queue: q.Queue, States: []backend.State{st}, Limit: 1})
			if err != nil {
				return storeRead{}, err
			}
			if len(rows) == 0 {
				continue
			}
			since := rows[0].RunAt
			if st == backend.StateRunning && rows[0].AttemptedAt != nil {
				since = *rows[0].AttemptedAt
			}
			read.oldest[[2]string{q.Queue, string(st)}] = max(0, time.Since(since))
		}
	}
	ws, err := client.Workflows(ctx, 0, workflowsRead)
	if err != nil {
		return storeRead{}, err
	}
	read.workflows, read.tasks = map[string]int{}, map[backend.State]int64{}
	for _, w := range ws {
		if w.Final() {
			read.workflows["final"]++
		} else {
			read.workflows["running"]++
		}
		for st, n := range w.Counts {
			read.tasks[st] += n
		}
	}
	bs, err := client.Batches(ctx, 0, workflowsRead)
	if err != nil {
		return storeRead{}, err
	}
	read.batches = map[string]int{}
	for _, b := range bs {
		switch {
		case b.FinishedAt != nil:
			read.batches["finished"]++
		case !b.Sealed:
			read.batches["open"]++
		default:
			read.batches["running"]++
		}
	}
	return read, nil
}

// JobsInserted implements spool.Observer.
func (m *Metrics) JobsInserted(queue, kind string, n int) {
	m.inserted.WithLabelValues(queue, kind).Add(float64(n))
}

// ClaimDone implements spool.Observer.
func (m *Metrics) ClaimDone(queue string, jobs int, took time.Duration, err error) {
	result := "ok"
	if err != nil && !errors.Is(err, context.Canceled) {
		result = "error"
	}
	m.claims.WithLabelValues(queue, result).Inc()
	m.claimSeconds.WithLabelValues(queue).Observe(took.Seconds())
}

// JobStarted implements spool.Observer.
func (m *Metrics) JobStarted(job *spool.JobRow, pickup time.Duration) {
	m.started.WithLabelValues(job.Queue, job.Kind).Inc()
	m.pickupSeconds.WithLabelValues(job.Queue).Observe(max(0, pickup.Seconds()))
}

// outcomeNames are the outcome label's values.
var outcomeNames = map[spool.EventKind]string{
	spool.EventJobCompleted: "completed",
	spool.EventJobFailed:    "failed",
	spool.EventJobDiscarded: "discarded",
	spool.EventJobCancelled: "cancelled",
	spool.EventJobSnoozed:   "snoozed",
}

// JobFinished implements spool.Observer.
func (m *Metrics) JobFinished(e *spool.Event) {
	name, ok := outcomeNames[e.Kind]
	if !ok {
		return
	}
	m.finished.WithLabelValues(e.Queue, e.JobKind, name).Inc()
	m.runSeconds.WithLabelValues(e.Queue, e.JobKind).Observe(e.Duration.Seconds())
}

// LeasesLost implements spool.Observer.
func (m *Metrics) LeasesLost(queue string, n int) {
	m.leasesLost.WithLabelValues(queue).Add(float64(n))
}

// JobsRescued implements spool.Observer.
func (m *Metrics) JobsRescued(retried, discarded int) {
	m.rescued.WithLabelValues("retried").Add(float64(retried))
	m.rescued.WithLabelValues("discarded").Add(float64(discarded))
}

// NotifierUp implements spool.Observer.
func (m *Metrics) NotifierUp(up bool) {
	m.notifierSeen.Store(true)
	if up {
		m.notifierUp.Set(1)
	} else {
		m.notifierUp.Set(0)
	}
}

var (
	_ prometheus.Collector = (*Metrics)(nil)
	_ spool.Observer       = (*Metrics)(nil)
)
