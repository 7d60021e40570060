package spool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

func TestConfigValidation(t *testing.T) {
	be := memory.New()
	cases := map[string]spool.Config{
		"empty queue name":     {Queues: map[string]spool.QueueConfig{"": {MaxWorkers: 1}}},
		"queue with SQL":       {Queues: map[string]spool.QueueConfig{"q'); drop table x; --": {MaxWorkers: 1}}},
		"queue name too long":  {Queues: map[string]spool.QueueConfig{strings.Repeat("q", 129): {MaxWorkers: 1}}},
		"zero workers":         {Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 0}}},
		"too many workers":     {Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 10001}}},
		"prefetch too large":   {Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1, Prefetch: 100001}}},
		"lease too short":      {LeaseDuration: time.Millisecond},
		"poll too fast":        {PollInterval: time.Microsecond},
		"negative delay":       {CompletionDelay: -time.Second},
		"negative batch":       {CompletionBatchMax: -1},
		"negative args limit":  {MaxArgsBytes: -1},
		"negative rescue tick": {RescueInterval: -time.Second},
		"client id too long":   {ClientID: strings.Repeat("c", 201)},
	}
	for name, cfg := range cases {
		if _, err := spool.NewClient(be, &cfg); !errors.Is(err, spool.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := spool.NewClient(nil, nil); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Errorf("nil backend: %v", err)
	}
	// A client with no workers inserts but cannot start.
	c, err := spool.NewClient(be, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); !errors.Is(err, spool.ErrNoWorkers) {
		t.Errorf("start without workers: %v", err)
	}
	if err := c.Stop(t.Context()); !errors.Is(err, spool.ErrNotStarted) {
		t.Errorf("stop before start: %v", err)
	}
	// Registering a kind twice is an error, not a silent replacement.
	ws := spool.NewWorkers()
	w := spool.WorkFunc(func(ctx context.Context, j *spool.Job[WelcomeEmail]) error { return nil })
	if err := spool.AddWorkerSafely(ws, w); err != nil {
		t.Fatal(err)
	}
	if err := spool.AddWorkerSafely(ws, w); !errors.Is(err, spool.ErrInvalidConfig) {
		t.Errorf("duplicate kind: %v", err)
	}
}

// TestStartNamesMissingConfig: Start of a client without Workers or Queues
// says which field is missing and how to fill it.
func TestStartNamesMissingConfig(t *testing.T) {
	be := memory.New()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[WelcomeEmail]) error { return nil }))
	for _, tc := range []struct {
		name string
		cfg  spool.Config
		want []string
	}{
		{"no queues", spool.Config{Workers: ws}, []string{"Config.Queues is empty", "MaxWorkers"}},
		{"no workers", spool.Config{Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}}, []string{"Config.Workers is nil", "spool.AddWorker"}},
		{"neither", spool.Config{}, []string{"Config.Workers is nil and Config.Queues is empty"}},
	} {
		c, err := spool.NewClient(be, &tc.cfg)
		if err != nil {
			t.Fatalf("%s: new client: %v", tc.name, err)
		}
		err = c.Start(t.Context())
		if !errors.Is(err, spool.ErrNoWorkers) {
			t.Fatalf("%s: start: %v, want ErrNoWorkers", tc.name, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: start: %q lacks %q", tc.name, err, want)
			}
		}
	}
}
