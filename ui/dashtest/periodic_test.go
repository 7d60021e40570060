package dashtest_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/ui"
)

// TestPeriodicFromStore: the periodic page of a dashboard whose client has
// no PeriodicJobs config (as spool ui serves it) lists the periodic jobs a
// leader recorded in the store, with schedule, queue, slots, run on start
// and when it was last recorded; the fixture's client, which defines a job
// no leader recorded, shows that one as not recorded yet beside the
// store's.
func TestPeriodicFromStore(t *testing.T) {
	f := newFixture(t, nil)
	last := time.Date(2030, 3, 4, 5, 0, 0, 0, time.UTC)
	if _, err := f.be.PeriodicRecord(context.Background(), &backend.PeriodicRecordParams{Jobs: []backend.PeriodicJob{{
		Name: "hourly-sync", Schedule: "0 * * * * (Europe/Berlin)", Queue: "sync",
		Since: last.Add(-24 * time.Hour), LastSlot: last, NextSlot: last.Add(time.Hour), StartedAt: last.Add(-time.Minute),
	}}}); err != nil {
		t.Fatal(err)
	}
	bare, err := spool.NewClient(f.be, &spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(bare, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	code, _, body := newSession(t, srv).get("/periodic")
	if code != 200 {
		t.Fatalf("GET /periodic: %d", code)
	}
	row := periodicRowHTML(t, body, "hourly-sync")
	for _, want := range []string{"0 * * * * (Europe/Berlin)", "sync", "2030-03-04 05:00:00", "2030-03-04 06:00:00", "2030-03-04 04:59:00", "not defined by this process"} {
		if !strings.Contains(row, want) {
			t.Errorf("row of hourly-sync lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "not recorded yet") || strings.Contains(row, "stale") || strings.Contains(body, "nightly-report") {
		t.Errorf("a fresh record shown stale, or the fixture's config shown by a client without it:\n%s", body)
	}

	_, _, body = newSession(t, serve(t, f)).get("/periodic")
	periodicRowHTML(t, body, "hourly-sync")
	if own := periodicRowHTML(t, body, "nightly-report"); !strings.Contains(own, "every 1h0m0s") || !strings.Contains(own, "not recorded yet") || !strings.Contains(own, "report") {
		t.Errorf("the serving client's own periodic job:\n%s", own)
	}
}

// periodicRowHTML returns the periodic page's table row of name.
func periodicRowHTML(t *testing.T, body, name string) string {
	t.Helper()
	start := strings.Index(body, `data-periodic="`+name+`"`)
	if start < 0 {
		t.Fatalf("no row of periodic job %s in:\n%s", name, body)
	}
	end := strings.Index(body[start:], "</tr>")
	return body[start : start+end]
}
