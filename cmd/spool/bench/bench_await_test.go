package bench

import "testing"

// TestBenchAwait runs bench await with announcements on PostgreSQL: each
// side awaits every job, the percentiles are ordered, and the scratch
// schema is dropped.
func TestBenchAwait(t *testing.T) {
	var res awaitResult
	benchJSON(t, &res, "await", "--jobs", "20", "--in-flight", "4", "--announce")
	if len(res.Sides) != 2 || !res.Announce {
		t.Fatalf("want 2 sides with announcements, got %+v", res)
	}
	for _, s := range res.Sides {
		if s.Latency.Count != 20 {
			t.Errorf("%s: %d jobs awaited, want 20", s.Side, s.Latency.Count)
		}
		checkOrdered(t, s.Side, s.Latency)
	}
	checkStoresDropped(t, res.Store)
	if r := runSpool(t, "bench", "await", "--in-flight", "0", "--database-url", "sqlite:///nonexistent/x.db"); r.Code != 2 {
		t.Errorf("--in-flight 0: exit %d, want 2 (%s)", r.Code, r.Stderr)
	}
}

// TestBenchDebounce runs bench debounce briefly on PostgreSQL: both kinds
// insert, in every round, and the scratch schema is dropped.
func TestBenchDebounce(t *testing.T) {
	var res debounceResult
	benchJSON(t, &res, "debounce", "--clients", "2", "--keys", "5", "--duration", "200ms", "--rounds", "2")
	if len(res.Modes) != 2 {
		t.Fatalf("want 2 kinds, got %+v", res.Modes)
	}
	for _, m := range res.Modes {
		if m.JobsPerS <= 0 || len(m.Runs) != 2 || m.Ratio <= 0 {
			t.Errorf("%s: %v inserts/s over runs %v, ratio %v", m.Mode, m.JobsPerS, m.Runs, m.Ratio)
		}
	}
	checkStoresDropped(t, res.Store)
}

// TestBenchCancel runs bench cancel on PostgreSQL: every job's handler is
// cancelled through each side, well before a heartbeat could have told it,
// and the scratch schema is dropped.
func TestBenchCancel(t *testing.T) {
	var res cancelResult
	benchJSON(t, &res, "cancel", "--jobs", "10")
	if len(res.Sides) != 2 {
		t.Fatalf("want 2 sides, got %+v", res)
	}
	for _, s := range res.Sides {
		if s.Latency.Count != 10 {
			t.Errorf("%s: %d jobs cancelled, want 10", s.Side, s.Latency.Count)
		}
		checkOrdered(t, s.Side, s.Latency)
	}
	checkStoresDropped(t, res.Store)
	if r := runSpool(t, "bench", "cancel", "--lease", "1s", "--database-url", "sqlite:///nonexistent/x.db"); r.Code != 2 {
		t.Errorf("--lease 1s: exit %d, want 2 (%s)", r.Code, r.Stderr)
	}
}
