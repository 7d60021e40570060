package spoolprom_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	spoolprom "github.com/spoolq/spool/prometheus"
)

// Resize is the args of an example job.
type Resize struct {
	Path string `json:"path"`
}

// Kind names the job type.
func (Resize) Kind() string { return "resize" }

// ExampleNew counts a client's jobs for Prometheus: two jobs are worked,
// one completes and one fails (to be retried in an hour), and a scrape
// shows the client's counters and, through WatchStore, the store's jobs by
// state. The memory backend stands in for a database here.
func ExampleNew() {
	ctx := context.Background()
	m := spoolprom.New(nil)
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(m)
	reg.MustRegister(m)

	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[Resize]) error {
		if job.Args.Path == "" {
			return errors.New("no image")
		}
		return nil
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers:     workers,
		Queues:      map[string]spool.QueueConfig{"images": {MaxWorkers: 2}},
		Observers:   []spool.Observer{m},
		RetryPolicy: spool.ConstantRetryPolicy{Delay: time.Hour},
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		panic(err)
	}
	m.WatchStore(client)
	events, end := client.Subscribe(spool.EventJobCompleted, spool.EventJobFailed)
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	for _, path := range []string{"cat.png", ""} {
		if _, err := client.Insert(ctx, Resize{Path: path}, &spool.InsertOpts{Queue: "images"}); err != nil {
			panic(err)
		}
	}
	<-events // observers hear of an outcome before subscribers
	<-events

	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	lines := bufio.NewScanner(scrape.Body)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "spool_jobs_") || (strings.HasPrefix(line, "spool_queue_jobs{") && !strings.HasSuffix(line, " 0")) {
			fmt.Println(line)
		}
	}
	// Output:
	// spool_jobs_finished_total{kind="resize",outcome="completed",queue="images"} 1
	// spool_jobs_finished_total{kind="resize",outcome="failed",queue="images"} 1
	// spool_jobs_inserted_total{kind="resize",queue="images"} 2
	// spool_jobs_started_total{kind="resize",queue="images"} 2
	// spool_queue_jobs{queue="images",state="completed"} 1
	// spool_queue_jobs{queue="images",state="retryable"} 1
}
