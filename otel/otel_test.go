package spoolotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/conformance"
	spoolotel "github.com/spoolq/spool/otel"
)

type mail struct {
	To string `json:"to"`
}

func (mail) Kind() string { return "mail" }

// TestTraceCarriedToRun: a job inserted inside a request's span runs in a
// span whose parent is the insert's span, in the request's trace, from the
// trace context stored in the job's metadata (the caller's own metadata
// kept); a failed run's span records the error; the metrics count inserts,
// starts, outcomes and the store's jobs.
func TestTraceCarriedToRun(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	be := memory.New()
	done := make(chan int64, 4)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[mail]) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Error("the handler's context has no span")
		}
		if j.Args.To == "flaky" && j.Attempt == 1 {
			return errors.New("smtp: 421")
		}
		done <- j.ID
		return nil
	}))
	cfg := &spool.Config{
		Workers:      ws,
		Queues:       map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}},
		RetryPolicy:  spool.ConstantRetryPolicy{Delay: 10 * time.Millisecond},
		PollInterval: 20 * time.Millisecond,
		Logger:       conformance.TestLogger(t, slog.LevelWarn),
	}
	m, err := spoolotel.Instrument(cfg, &spoolotel.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	c, err := spool.NewClient(be, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.WatchStore(c)
	reqCtx, req := tp.Tracer("test").Start(ctx, "request")
	res, err := c.Insert(reqCtx, mail{To: "ada"}, &spool.InsertOpts{Metadata: json.RawMessage(`{"tenant":"acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	flaky, err := c.Insert(reqCtx, mail{To: "flaky"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.End()
	stored, err := c.JobGet(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(stored.Metadata, &meta); err != nil || meta["tenant"] != "acme" || meta[spoolotel.MetadataKey] == nil {
		t.Fatalf("metadata: %s %v", stored.Metadata, err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("jobs not worked")
		}
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	var inserts, runs []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch s.Name() {
		case "spool.insert":
			inserts = append(inserts, s)
		case "spool.work mail":
			runs = append(runs, s)
		}
	}
	if len(inserts) != 2 || len(runs) != 3 {
		t.Fatalf("%d insert spans and %d run spans, want 2 and 3", len(inserts), len(runs))
	}
	traceID := req.SpanContext().TraceID()
	insertIDs := map[trace.SpanID]bool{}
	for _, s := range inserts {
		if s.SpanContext().TraceID() != traceID || s.Parent().SpanID() != req.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindProducer {
			t.Errorf("insert span not a producer child of the request: %v", s.Parent())
		}
		insertIDs[s.SpanContext().SpanID()] = true
	}
	failed := 0
	for _, s := range runs {
		if s.SpanContext().TraceID() != traceID || !insertIDs[s.Parent().SpanID()] || s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("run span %v is not a consumer child of an insert span (parent %v)", s.SpanContext(), s.Parent())
		}
		if s.Status().Code == codes.Error {
			failed++
			if !hasAttr(s.Attributes(), attribute.String("messaging.message.id", itoa(flaky.ID))) {
				t.Errorf("failed run span is not job %d's: %v", flaky.ID, s.Attributes())
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed run spans, want 1", failed)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[mt.Name] += p.Value
					if mt.Name == "spool.jobs.finished" {
						o, _ := p.Attributes.Value("outcome")
						sums["finished."+o.AsString()] += p.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if s, _ := p.Attributes.Value("state"); s.AsString() == "completed" {
						sums["queue.completed"] += p.Value
					}
				}
			}
		}
	}
	for name, want := range map[string]int64{"spool.jobs.inserted": 2, "spool.jobs.started": 3, "finished.completed": 2, "finished.failed": 1, "queue.completed": 2} {
		if sums[name] != want {
			t.Errorf("%s = %d, want %d (all: %v)", name, sums[name], want, sums)
		}
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
