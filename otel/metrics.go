package spoolotel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// Metrics records a client's measurements as OpenTelemetry metrics; it is
// a spool.Observer.
type Metrics struct {
	spool.NopObserver
	inserted, started, finished, claims, leasesLost, rescued metric.Int64Counter
	claimDuration, pickup, runDuration                       metric.Float64Histogram

	client  atomic.Pointer[spool.Client]
	storeMu sync.Mutex
	counts  []backend.QueueStats
	at      time.Time
}

// storeInterval is the least time between two reads of the store's counts.
const storeInterval = 15 * time.Second

// NewMetrics makes the instruments on the options' meter provider.
func NewMetrics(opts *Options) (*Metrics, error) {
	o := opts.withDefaults()
	meter := o.MeterProvider.Meter(scope)
	m := &Metrics{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	m.inserted = counter("spool.jobs.inserted", "{job}", "Jobs written by this process's insert statements.")
	m.started = counter("spool.jobs.started", "{job}", "Handler runs started.")
	m.finished = counter("spool.jobs.finished", "{job}", "Outcomes of handler runs written to the store, by outcome.")
	m.claims = counter("spool.claims", "{claim}", "Claims made, by result.")
	m.leasesLost = counter("spool.leases.lost", "{job}", "Running jobs whose lease was lost.")
	m.rescued = counter("spool.jobs.rescued", "{job}", "Jobs whose lease had ended, retried or discarded by the maintenance leader.")
	m.claimDuration = hist("spool.claim.duration", "Time a claim took.")
	m.pickup = hist("spool.job.pickup", "Time from a job's run time to its handler's start.")
	m.runDuration = hist("spool.job.duration", "Time a handler ran.")
	_, err := meter.Int64ObservableGauge("spool.queue.jobs", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs in the store by queue and state (read at most every 15 s)."),
		metric.WithInt64Callback(m.observeStore))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// WatchStore makes the spool.queue.jobs gauge report the store's jobs by
// queue and state, read through client at most every 15 seconds.
func (m *Metrics) WatchStore(client *spool.Client) { m.client.Store(client) }

func (m *Metrics) observeStore(ctx context.Context, o metric.Int64Observer) error {
	client := m.client.Load()
	if client == nil {
		return nil
	}
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	if m.at.IsZero() || time.Since(m.at) >= storeInterval {
		counts, err := client.QueueStats(ctx)
		if err != nil {
			return err
		}
		m.counts, m.at = counts, time.Now()
	}
	for _, q := range m.counts {
		for _, st := range backend.AllStates {
			o.Observe(q.Counts[st], metric.WithAttributes(attribute.String("queue", q.Queue), attribute.String("state", string(st))))
		}
	}
	return nil
}

func queueKind(queue, kind string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("queue", queue), attribute.String("kind", kind))
}

// JobsInserted implements spool.Observer.
func (m *Metrics) JobsInserted(queue, kind string, n int) {
	m.inserted.Add(context.Background(), int64(n), queueKind(queue, kind))
}

// ClaimDone implements spool.Observer.
func (m *Metrics) ClaimDone(queue string, jobs int, took time.Duration, err error) {
	result := "ok"
	if err != nil && !errors.Is(err, context.Canceled) {
		result = "error"
	}
	ctx := context.Background()
	m.claims.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", queue), attribute.String("result", result)))
	m.claimDuration.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("queue", queue)))
}

// JobStarted implements spool.Observer.
func (m *Metrics) JobStarted(job *spool.JobRow, pickup time.Duration) {
	ctx := context.Background()
	m.started.Add(ctx, 1, queueKind(job.Queue, job.Kind))
	m.pickup.Record(ctx, max(0, pickup.Seconds()), metric.WithAttributes(attribute.String("queue", job.Queue)))
}

// JobFinished implements spool.Observer.
func (m *Metrics) JobFinished(e *spool.Event) {
	ctx := context.Background()
	outcome := string(e.Kind)
	if len(outcome) > len("job_") {
		outcome = outcome[len("job_"):]
	}
	m.finished.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue), attribute.String("kind", e.JobKind), attribute.String("outcome", outcome)))
	m.runDuration.Record(ctx, e.Duration.Seconds(), queueKind(e.Queue, e.JobKind))
}

// LeasesLost implements spool.Observer.
func (m *Metrics) LeasesLost(queue string, n int) {
	m.leasesLost.Add(context.Background(), int64(n), metric.WithAttributes(attribute.String("queue", queue)))
}

// JobsRescued implements spool.Observer.
func (m *Metrics) JobsRescued(retried, discarded int) {
	ctx := context.Background()
	m.rescued.Add(ctx, int64(retried), metric.WithAttributes(attribute.String("result", "retried")))
	m.rescued.Add(ctx, int64(discarded), metric.WithAttributes(attribute.String("result", "discarded")))
}

var _ spool.Observer = (*Metrics)(nil)
