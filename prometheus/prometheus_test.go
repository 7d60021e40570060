package spoolprom_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
	spoolprom "github.com/spoolq/spool/prometheus"
)

type work struct {
	Mode string `json:"mode"`
}

func (work) Kind() string { return "work" }

// TestMetrics runs jobs on the memory store with the metrics as observer and
// reads them as Prometheus scrapes them: inserts, starts and outcomes by
// queue and kind, claim and run histograms, and the store's counts.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	be := memory.New()
	m := spoolprom.New(&spoolprom.Options{StoreInterval: time.Millisecond})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[work]) error {
		switch j.Args.Mode {
		case "fail":
			if j.Attempt == 1 {
				return errors.New("flaky")
			}
		case "discard":
			return spool.Discard(errors.New("bad"))
		}
		return nil
	}))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{"mq": {MaxWorkers: 2}},
		RetryPolicy:  spool.ConstantRetryPolicy{Delay: 10 * time.Millisecond},
		PollInterval: 20 * time.Millisecond,
		Observers:    []spool.Observer{m},
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.WatchStore(c)
	// A paused queue keeps one job available for the store's gauges.
	if err := c.QueuePause(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(ctx, []spool.InsertManyParams{
		{Args: work{Mode: "ok"}, InsertOpts: &spool.InsertOpts{Queue: "mq"}},
		{Args: work{Mode: "fail"}, InsertOpts: &spool.InsertOpts{Queue: "mq"}},
		{Args: work{Mode: "discard"}, InsertOpts: &spool.InsertOpts{Queue: "mq"}},
		{Args: work{Mode: "ok"}, InsertOpts: &spool.InsertOpts{Queue: "held"}},
	}); err != nil {
		t.Fatal(err)
	}
	// A workflow and an open batch in the paused queue: one task waits.
	w := spool.NewWorkflow("wf")
	w.Add("a", work{Mode: "ok"}, &spool.InsertOpts{Queue: "held"})
	w.Add("b", work{Mode: "ok"}, &spool.InsertOpts{Queue: "held"}, spool.After("a"))
	if _, err := c.InsertWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertBatch(ctx, spool.BatchOpts{Open: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	finished := func(outcome string) float64 {
		return testutil.ToFloat64(mustCounter(t, reg, "spool_jobs_finished_total", map[string]string{"queue": "mq", "kind": "work", "outcome": outcome}))
	}
	deadline := time.Now().Add(20 * time.Second)
	for finished("completed") != 2 || finished("discarded") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("completed %v, discarded %v", finished("completed"), finished("discarded"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := finished("failed"); got != 1 {
		t.Errorf("failed: %v, want 1", got)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "spool_jobs_inserted_total", map[string]string{"queue": "mq", "kind": "work"})); got != 3 {
		t.Errorf("inserted into mq: %v, want 3", got)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "spool_jobs_started_total", map[string]string{"queue": "mq", "kind": "work"})); got != 4 {
		t.Errorf("started in mq: %v, want 4 (one retry)", got)
	}
	text, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain,
		"spool_queue_jobs", "spool_claim_duration_seconds", "spool_job_run_seconds", "spool_job_pickup_seconds", "spool_notifier_up", "spool_queue_oldest_job_age_seconds", "spool_store_read_errors",
		"spool_workflows", "spool_workflow_tasks", "spool_batches")
	if err != nil {
		t.Fatal(err)
	}
	out := string(text)
	for _, want := range []string{
		`spool_queue_jobs{queue="held",state="available"} 2`,
		`spool_queue_jobs{queue="held",state="waiting"} 1`,
		`spool_workflows{status="running"} 1`,
		`spool_workflow_tasks{state="waiting"} 1`,
		`spool_workflow_tasks{state="available"} 1`,
		`spool_batches{status="open"} 1`,
		`spool_queue_jobs{queue="mq",state="completed"} 2`,
		`spool_queue_jobs{queue="mq",state="discarded"} 1`,
		`spool_claim_duration_seconds_count{queue="mq"}`,
		`spool_job_run_seconds_count{kind="work",queue="mq"} 4`,
		`spool_job_pickup_seconds_count{queue="mq"} 4`,
		`spool_notifier_up 1`,
		`spool_queue_oldest_job_age_seconds{queue="held",state="available"}`,
		`spool_store_read_errors 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q:\n%s", want, out)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// mustCounter finds one series of a metric vector in the registry.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	return &oneSeries{reg: reg, name: name, labels: labels, t: t}
}

// oneSeries is a Collector of one series of a gathered metric family.
type oneSeries struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
	t      *testing.T
}

func (o *oneSeries) Describe(chan<- *prometheus.Desc) {}

func (o *oneSeries) Collect(ch chan<- prometheus.Metric) {
	fams, err := o.reg.Gather()
	if err != nil {
		o.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != o.name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if o.labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(o.name, "x", nil, nil), prometheus.CounterValue, s.GetCounter().GetValue())
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(o.name, "x", nil, nil), prometheus.CounterValue, 0)
}
