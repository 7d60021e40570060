package spoolotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	spoolotel "github.com/spoolq/spool/otel"
)

// Welcome is the args of an example job.
type Welcome struct {
	To string `json:"to"`
}

// Kind names the job type.
func (Welcome) Kind() string { return "welcome" }

// ExampleInstrument traces a job from the request that enqueued it to its
// run: the insert is a span in the request's trace, and the run a span
// whose parent is the insert's, from the trace context stored with the job.
// A span recorder stands in for an exporter, and the memory backend for a
// database.
func ExampleInstrument() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[Welcome]) error {
		return nil // a real handler passes ctx on, so its own spans join the trace
	}))
	cfg := &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if _, err := spoolotel.Instrument(cfg, &spoolotel.Options{TracerProvider: tp}); err != nil {
		panic(err)
	}
	client, err := spool.NewClient(memory.New(), cfg)
	if err != nil {
		panic(err)
	}
	done, end := client.Subscribe(spool.EventJobCompleted)
	defer end()

	reqCtx, req := tp.Tracer("app").Start(ctx, "POST /signup")
	if _, err := client.Insert(reqCtx, Welcome{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	req.End()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	<-done // the run's span ends before its outcome is written

	names := map[trace.SpanID]string{}
	for _, s := range spans.Ended() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	reqTrace := req.SpanContext().TraceID()
	for _, s := range spans.Ended() {
		parent := names[s.Parent().SpanID()]
		if parent == "" {
			parent = "none"
		}
		fmt.Printf("%s: parent %s, in the request's trace %t\n", s.Name(), parent, s.SpanContext().TraceID() == reqTrace)
	}
	// Output:
	// spool.insert: parent POST /signup, in the request's trace true
	// POST /signup: parent none, in the request's trace true
	// spool.work welcome: parent spool.insert, in the request's trace true
}
