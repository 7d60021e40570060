package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// testPeriodicRecords: the store keeps one record per periodic job name.
// The first record fixes Since; later ones take the schedule, queue and
// next slot, move LastSlot only forward, and take StartedAt only when the
// stored one is older than StartAfter; SeenAt is the store's now at each
// record. Another handle on the store lists the records by name, and two
// leaders recording one new job at once both get back one Since and one
// StartedAt.
func testPeriodicRecords(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 2, 12, 0, 0, 123456000, time.UTC)
	rec := func(b backend.Backend, startAfter time.Time, jobs ...backend.PeriodicJob) []backend.PeriodicJob {
		t.Helper()
		got, err := b.PeriodicRecord(ctx, &backend.PeriodicRecordParams{Jobs: jobs, StartAfter: startAfter})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(jobs) {
			t.Fatalf("recorded %d jobs, got %d back", len(jobs), len(got))
		}
		for i := range got {
			if got[i].Name != jobs[i].Name {
				t.Fatalf("record %d came back as %q, want %q (the order given)", i, got[i].Name, jobs[i].Name)
			}
		}
		return got
	}
	before := time.Now()
	got := rec(be, time.Time{},
		backend.PeriodicJob{Name: "report", Schedule: "0 9 * * * (UTC)", Queue: "reports", Since: t0, NextSlot: t0.Add(time.Hour)},
		backend.PeriodicJob{Name: "cleanup", Schedule: "every 1m0s", Queue: spool.DefaultQueue, Since: t0, LastSlot: t0, NextSlot: t0.Add(time.Minute), StartedAt: t0})
	r, c := got[0], got[1]
	if !r.Since.Equal(t0) || r.Schedule != "0 9 * * * (UTC)" || r.Queue != "reports" || !r.LastSlot.IsZero() || !r.NextSlot.Equal(t0.Add(time.Hour)) || !r.StartedAt.IsZero() {
		t.Fatalf("new record %+v, want it as given", r)
	}
	if !c.LastSlot.Equal(t0) || !c.StartedAt.Equal(t0) || !c.NextSlot.Equal(t0.Add(time.Minute)) {
		t.Fatalf("new record %+v, want its slots and start as given", c)
	}
	if d := r.SeenAt.Sub(before); d < -time.Minute || d > time.Minute {
		t.Fatalf("SeenAt %v: not the store's now (the test's clock says %v)", r.SeenAt, before)
	}

	// A later record: Since kept, LastSlot forward only, StartedAt kept
	// while it is not before StartAfter.
	other := h.Reopen(t, be)
	got = rec(other, t0.Add(-time.Minute),
		backend.PeriodicJob{Name: "report", Schedule: "30 9 * * * (UTC)", Queue: "late", Since: t0.Add(time.Hour), LastSlot: t0.Add(time.Hour), NextSlot: t0.Add(2 * time.Hour)},
		backend.PeriodicJob{Name: "cleanup", Schedule: "every 1m0s", Queue: spool.DefaultQueue, Since: t0.Add(time.Hour), LastSlot: t0.Add(-time.Minute), StartedAt: t0.Add(time.Second)})
	r, c = got[0], got[1]
	if !r.Since.Equal(t0) || r.Schedule != "30 9 * * * (UTC)" || r.Queue != "late" || !r.LastSlot.Equal(t0.Add(time.Hour)) || !r.NextSlot.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("record after an update %+v: want Since kept, the rest taken", r)
	}
	if !c.Since.Equal(t0) || !c.LastSlot.Equal(t0) || !c.NextSlot.IsZero() || !c.StartedAt.Equal(t0) || c.SeenAt.Before(got[0].SeenAt.Add(-time.Second)) {
		t.Fatalf("record after an update %+v: want LastSlot not moved back, NextSlot cleared, StartedAt kept (not before StartAfter)", c)
	}
	got = rec(be, t0.Add(time.Minute), backend.PeriodicJob{Name: "cleanup", Since: t0, StartedAt: t0.Add(2 * time.Minute)})
	if !got[0].StartedAt.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("StartedAt %v, want the new start: the stored one is before StartAfter", got[0].StartedAt)
	}

	list, err := other.PeriodicList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "cleanup" || list[1].Name != "report" || !list[1].Since.Equal(t0) || list[1].Queue != "late" || !list[0].StartedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("list %+v, want cleanup and report as recorded", list)
	}

	// Two leaders record one new job at once, each with its own start.
	var wg sync.WaitGroup
	results := make([]backend.PeriodicJob, 2)
	for i, b := range []backend.Backend{be, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := t0.Add(time.Duration(i+1) * time.Second)
			got, err := b.PeriodicRecord(ctx, &backend.PeriodicRecordParams{StartAfter: at.Add(-time.Minute),
				Jobs: []backend.PeriodicJob{{Name: "both", Schedule: "every 1h0m0s", Queue: spool.DefaultQueue, Since: at, StartedAt: at}}})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = got[0]
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	a, b := results[0], results[1]
	given := func(at time.Time) bool { return at.Equal(t0.Add(time.Second)) || at.Equal(t0.Add(2*time.Second)) }
	if !a.Since.Equal(b.Since) || !a.StartedAt.Equal(b.StartedAt) || !given(a.Since) || !given(a.StartedAt) {
		t.Fatalf("two leaders at once got %+v and %+v, want one Since and one StartedAt, each one of the two given", a, b)
	}
}

type periodicNote struct {
	At    time.Time `json:"at"`
	Start bool      `json:"start"`
}

func (periodicNote) Kind() string { return "conformance_periodic" }

// testPeriodicFirstStart: a periodic job the store has never recorded
// fires no slot from before its first record, runs once on start, and is
// listed with its schedule, queue and slots by a process that has no
// PeriodicJobs config (as the spool command and its dashboard are).
func testPeriodicFirstStart(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	ran := make(chan periodicNote, 100)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[periodicNote]) error {
		ran <- j.Args
		return nil
	}))
	cfg := fastConfig(ws, 4)
	cfg.PeriodicJobs = []spool.PeriodicJob{{
		Name: "tick", Schedule: spool.Every(200 * time.Millisecond), RunOnStart: true,
		Args: func(slot time.Time) spool.JobArgs { return periodicNote{At: slot} },
	}}
	started := time.Now().Truncate(time.Microsecond)
	start(t, newClient(t, be, cfg))

	reader := newClient(t, h.Reopen(t, be), &spool.Config{})
	var startedAt time.Time
	deadline := time.Now().Add(15 * time.Second)
	for {
		recs, err := reader.PeriodicRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && !recs[0].LastSlot.IsZero() {
			r := recs[0]
			if r.Name != "tick" || r.Schedule != "every 200ms" || r.Queue != spool.DefaultQueue || r.Since.Before(started) ||
				r.LastSlot.Before(r.Since) || r.StartedAt.IsZero() || r.StartedAt.Before(started) || r.SeenAt.IsZero() {
				t.Fatalf("record %+v, want tick's schedule, queue, since its start, a slot fired and a run on start", r)
			}
			startedAt = r.StartedAt
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records %+v: no fired slot recorded within 15 s", recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The run on start and slots run; none from before the first start.
	var slots, starts int
	for starts == 0 || slots < 2 {
		n := recv(t, ran, "periodic job")
		switch {
		case n.At.Before(started):
			t.Fatalf("a job for %v ran: back-filled from before the job's first start (%v)", n.At, started)
		case n.At.Equal(startedAt):
			starts++
		case n.At.UnixNano()%int64(200*time.Millisecond) == 0:
			slots++
		default:
			t.Fatalf("a job for %v ran: neither a slot nor the run on start (%v)", n.At, startedAt)
		}
	}
	jobs, err := reader.JobList(ctx, &spool.JobListParams{Kind: "conformance_periodic", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs {
		if j.RunAt.Equal(startedAt) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d jobs run on start, want 1", n)
	}
}
