package spool_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/testdb"
)

type smokeArgs struct {
	N int `json:"n"`
}

func (smokeArgs) Kind() string { return "smoke" }

func TestSmoke(t *testing.T) {
	be := testdb.Postgres(t)
	var n atomic.Int64
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[smokeArgs]) error { n.Add(1); return nil }))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	params := make([]spool.InsertManyParams, 1000)
	for i := range params {
		params[i] = spool.InsertManyParams{Args: smokeArgs{N: i}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, smokeArgs{N: -1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < 1001 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := c.QueueStats(ctx)
	t.Logf("ran %d, stats %+v", n.Load(), st)
}
