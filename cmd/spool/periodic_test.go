package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

type tickArgs struct{}

func (tickArgs) Kind() string { return "tick" }

// TestPeriodicList: spool periodic, which has no PeriodicJobs config, lists
// what a leading client recorded in the store: the schedule, queue, slots
// and run on start of each periodic job; --json gives the same; a store
// with none says where they come from; a record no leader refreshed for
// longer than spool.PeriodicStaleAfter is shown stale.
func TestPeriodicList(t *testing.T) {
	db := sqliteStore(t)
	if r := mustSpool(t, "periodic", "--database-url", db); !strings.Contains(r.Stdout, "no periodic jobs recorded") {
		t.Fatalf("an empty store printed %q", r.Stdout)
	}
	ctx := context.Background()
	be, err := backend.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = be.Close() }()
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[tickArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{Workers: ws, Queues: map[string]spool.QueueConfig{"ticks": {MaxWorkers: 1}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PeriodicJobs: []spool.PeriodicJob{{Name: "tick", Schedule: spool.Every(100 * time.Millisecond), RunOnStart: true,
			Args: func(time.Time) spool.JobArgs { return tickArgs{} }, Opts: &spool.InsertOpts{Queue: "ticks"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		recs, err := c.PeriodicRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && !recs[0].LastSlot.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records %+v: no slot recorded within 15 s", recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	var got []periodicJSON
	if err := json.Unmarshal([]byte(mustSpool(t, "periodic", "list", "--json", "--database-url", db).Stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "tick" || got[0].Schedule != "every 100ms" || got[0].Queue != "ticks" ||
		got[0].LastSlot == nil || got[0].NextSlot == nil || got[0].StartedAt == nil || got[0].Stale {
		t.Fatalf("--json listed %+v, want tick with its schedule, queue, slots and run on start, live", got)
	}
	table := mustSpool(t, "periodic", "--database-url", db).Stdout
	for _, want := range []string{"NAME", "SCHEDULE", "tick", "every 100ms", "ticks", got[0].LastSlot.UTC().Format(time.RFC3339), " ago"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "stale") {
		t.Errorf("a record just seen is shown stale:\n%s", table)
	}

	recs, err := c.PeriodicRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	later := recs[0].SeenAt.Add(spool.PeriodicStaleAfter + time.Second)
	var b bytes.Buffer
	rows := periodicRows(recs, later)
	if err := printPeriodic(&b, rows, later); err != nil {
		t.Fatal(err)
	}
	if !rows[0].Stale || !strings.Contains(b.String(), "stale: no leader declares it") {
		t.Fatalf("a record unseen for longer than %v: stale %v, table:\n%s", spool.PeriodicStaleAfter, rows[0].Stale, b.String())
	}
	for _, args := range [][]string{{"periodic", "delete"}, {"periodic", "list", "x"}} {
		if r := runSpool(t, append(args, "--database-url", db)...); r.Code != 2 {
			t.Errorf("spool %v: exit %d, want 2", args, r.Code)
		}
	}
}
