// Package spoolotel instruments Spool with OpenTelemetry: a span around
// every insert and every run of a handler, the trace context carried from
// the inserting span to the job's run (stored in the job's metadata under
// "spool_trace", so that it crosses processes and restarts), and metrics
// for those who prefer OpenTelemetry's to Prometheus's.
//
//	cfg := &spool.Config{…}
//	m, err := spoolotel.Instrument(cfg, nil) // global providers and propagator
//	client, err := spool.NewClient(be, cfg)
//	m.WatchStore(client) // optional: queue depth from the store
//
// It is a module of its own, so that Spool's core requires nothing.
package spoolotel

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/spoolq/spool"
)

// scope names the instrumentation.
const scope = "github.com/spoolq/spool/otel"

// MetadataKey is the key of a job's metadata that holds the trace context
// of the span that inserted it.
const MetadataKey = "spool_trace"

// Options choose the providers; nil fields take OpenTelemetry's globals.
type Options struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Propagator writes and reads the trace context stored with a job
	// (default otel.GetTextMapPropagator(), or W3C trace context when the
	// global one writes nothing).
	Propagator propagation.TextMapPropagator
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.TracerProvider == nil {
		out.TracerProvider = otel.GetTracerProvider()
	}
	if out.MeterProvider == nil {
		out.MeterProvider = otel.GetMeterProvider()
	}
	if out.Propagator == nil {
		out.Propagator = otel.GetTextMapPropagator()
		if len(out.Propagator.Fields()) == 0 {
			out.Propagator = propagation.TraceContext{}
		}
	}
	return out
}

// Instrument adds the insert and work middleware to cfg and returns the
// metrics, already among cfg.Observers.
func Instrument(cfg *spool.Config, opts *Options) (*Metrics, error) {
	m, err := NewMetrics(opts)
	if err != nil {
		return nil, err
	}
	cfg.InsertMiddleware = append(cfg.InsertMiddleware, InsertMiddleware(opts))
	cfg.WorkMiddleware = append(cfg.WorkMiddleware, WorkMiddleware(opts))
	cfg.Observers = append(cfg.Observers, m)
	return m, nil
}

// InsertMiddleware returns middleware that wraps each insert call in a
// producer span ("spool.insert") and stores the span's context in every
// job's metadata under MetadataKey. Callers' options are copied, never
// changed.
func InsertMiddleware(opts *Options) spool.InsertMiddleware {
	o := opts.withDefaults()
	tracer := o.TracerProvider.Tracer(scope)
	return func(ctx context.Context, jobs []spool.InsertManyParams, next func(context.Context, []spool.InsertManyParams) error) error {
		attrs := []attribute.KeyValue{
			attribute.String("messaging.system", "spool"),
			attribute.String("messaging.operation.type", "create"),
			attribute.Int("messaging.batch.message_count", len(jobs)),
		}
		if len(jobs) > 0 && jobs[0].Args != nil {
			attrs = append(attrs, attribute.String("spool.job.kind", jobs[0].Args.Kind()))
			queue := spool.DefaultQueue
			if jobs[0].InsertOpts != nil && jobs[0].InsertOpts.Queue != "" {
				queue = jobs[0].InsertOpts.Queue
			}
			attrs = append(attrs, attribute.String("messaging.destination.name", queue))
		}
		ctx, span := tracer.Start(ctx, "spool.insert", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		defer span.End()
		carrier := propagation.MapCarrier{}
		o.Propagator.Inject(ctx, carrier)
		out := jobs
		if len(carrier) > 0 {
			out = make([]spool.InsertManyParams, len(jobs))
			for i, j := range jobs {
				var opts spool.InsertOpts
				if j.InsertOpts != nil {
					opts = *j.InsertOpts
				}
				meta, err := withTrace(opts.Metadata, carrier)
				if err != nil {
					// Bad metadata is the insert's to refuse, with its own
					// typed error: pass the job on unchanged.
					out[i] = j
					continue
				}
				opts.Metadata = meta
				out[i] = spool.InsertManyParams{Args: j.Args, InsertOpts: &opts}
			}
		}
		err := next(ctx, out)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}

// withTrace adds the carrier under MetadataKey to a metadata object.
func withTrace(meta json.RawMessage, carrier propagation.MapCarrier) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("metadata is not a JSON object")
		}
	}
	trace, err := json.Marshal(map[string]string(carrier))
	if err != nil {
		return nil, err
	}
	obj[MetadataKey] = trace
	return json.Marshal(obj)
}

// WorkMiddleware returns middleware that runs each handler in a consumer
// span ("spool.work KIND"), the child of the span that inserted the job
// when its metadata carries one. A run that fails records the error.
func WorkMiddleware(opts *Options) spool.WorkMiddleware {
	o := opts.withDefaults()
	tracer := o.TracerProvider.Tracer(scope)
	return func(ctx context.Context, job *spool.JobRow, next func(context.Context) error) error {
		if carrier := traceOf(job.Metadata); carrier != nil {
			ctx = o.Propagator.Extract(ctx, carrier)
		}
		ctx, span := tracer.Start(ctx, "spool.work "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", "spool"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", job.Queue),
				attribute.String("messaging.message.id", strconv.FormatInt(job.ID, 10)),
				attribute.String("spool.job.kind", job.Kind),
				attribute.Int("spool.job.attempt", int(job.Attempt)),
				attribute.Int("spool.job.max_attempts", int(job.MaxAttempts)),
			))
		defer span.End()
		err := next(ctx)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}

// traceOf reads the trace context a job's metadata carries, nil if none.
func traceOf(meta json.RawMessage) propagation.MapCarrier {
	if len(meta) == 0 {
		return nil
	}
	var obj struct {
		Trace map[string]string `json:"spool_trace"`
	}
	if err := json.Unmarshal(meta, &obj); err != nil || len(obj.Trace) == 0 {
		return nil
	}
	return propagation.MapCarrier(obj.Trace)
}
