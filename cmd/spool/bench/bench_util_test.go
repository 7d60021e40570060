package bench

import (
	"fmt"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ds := make([]time.Duration, 1000)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Millisecond // 1 ms … 1000 ms
	}
	for q, want := range map[float64]time.Duration{0.5: 500, 0.95: 950, 0.99: 990, 0.999: 999, 1: 1000, 0.0001: 1} {
		if got := percentile(ds, q); got != want*time.Millisecond {
			t.Errorf("p%v = %v, want %v ms", q*100, got, want)
		}
	}
	if got := percentile(ds[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one value = %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
	s := Summarize([]time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond})
	if s.Count != 4 || s.P50 != 2 || s.Max != 4 || s.Mean != 2.5 || s.P99 != 4 {
		t.Errorf("summarize: %+v", s)
	}
}

func TestLatencyWindows(t *testing.T) {
	var samples []TimedLatency
	for i := range 30 {
		// 10 samples in each of seconds 0 and 2, none in second 1, 10 in 3.
		sec := []int{0, 2, 3}[i/10]
		samples = append(samples, TimedLatency{at: time.Duration(sec)*time.Second + time.Duration(i)*time.Millisecond, d: time.Duration(i%10+1) * time.Millisecond})
	}
	ws := latencyWindows(samples, time.Second)
	if len(ws) != 3 {
		t.Fatalf("want 3 windows (empty ones left out), got %+v", ws)
	}
	for i, at := range []float64{0, 2, 3} {
		w := ws[i]
		if w.At != at || w.Count != 10 || w.P50 != 5 || w.P99 != 10 || w.Max != 10 {
			t.Errorf("window %d: %+v", i, w)
		}
	}
}

func TestRatePoints(t *testing.T) {
	var samples []countSample
	for i := range 11 {
		samples = append(samples, countSample{at: time.Duration(i) * 100 * time.Millisecond, n: int64(i * 50)})
	}
	pts := ratePoints(samples, 200*time.Millisecond)
	if len(pts) != 5 {
		t.Fatalf("want 5 windows of 200 ms over 1 s, got %v", pts)
	}
	for _, p := range pts {
		if p.Y < 499.9 || p.Y > 500.1 {
			t.Errorf("rate %v at %v, want 500/s", p.Y, p.X)
		}
	}
}

func TestLog2Bins(t *testing.T) {
	bins := log2Bins([]int64{0, 0, 1, 2, 3, 4, 7, 8, 20, -3})
	got := fmt.Sprint(bins)
	want := "[{0 0 3} {1 1 1} {2 3 2} {4 7 2} {8 15 1} {16 31 1}]"
	if got != want {
		t.Errorf("log2Bins = %s, want %s", got, want)
	}
	if len(log2Bins(nil)) != 0 {
		t.Error("no distances, no bins")
	}
}

func TestParseCountList(t *testing.T) {
	got, err := ParseCountList("1e4, 100000,1E6")
	if err != nil || fmt.Sprint(got) != "[10000 100000 1000000]" {
		t.Errorf("parseCountList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1.5", "1e13", "x", "1e4,,1e5"} {
		if _, err := ParseCountList(bad); err == nil {
			t.Errorf("parseCountList(%q) should fail", bad)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Split divides each job's pickup at its claim's start: medians of both
// parts, the claims that began before their insert returned, and the
// slowest 2%'s means; jobs lacking a time are left out.
func TestPickupSplit(t *testing.T) {
	base := time.Unix(1000, 0)
	r := NewPickupRecorder(base, 102)
	ms := func(n float64) time.Time { return base.Add(time.Duration(n * float64(time.Millisecond))) }
	for seq := range int64(100) {
		r.commit[seq].Store(int64(ms(float64(seq)).Sub(base)) + 1)
		before, after := 0.2, 0.5
		if seq < 10 {
			before = -0.1 // a claim already out
		}
		if seq == 99 {
			before, after = 30, 10 // the slowest 2% is this one and seq 98
		}
		if seq == 98 {
			before, after = 10, 5
		}
		r.ClaimBeganAt(seq, ms(float64(seq)+before))
		if seq >= 10 { // the claim's call takes 80% of the part after it began
			r.ClaimReturnedAt(seq, ms(float64(seq)+before+0.8*after))
		}
		r.HandlerStartedAt(seq, ms(float64(seq)+before+after))
	}
	r.commit[100].Store(1) // no claim time: left out
	r.HandlerStartedAt(100, ms(1))
	sp := r.Split(102)
	near := func(d time.Duration, want float64) bool {
		return (d - time.Duration(want*float64(time.Millisecond))).Abs() < time.Microsecond
	}
	if sp.Jobs != 100 || sp.ClaimBeganFirst != 10 || !near(sp.BeforeP50, 0.2) || !near(sp.AfterP50, 0.5) {
		t.Fatalf("split %+v: want 100 jobs, 10 claims first, p50s 0.2 and 0.5 ms", sp)
	}
	if !near(sp.SlowFrom, 15) || !near(sp.SlowBefore, 20) || !near(sp.SlowAfter, 7.5) {
		t.Fatalf("split %+v: want the slowest 2%% from 15 ms, means 20 and 7.5 ms", sp)
	}
	if sp.Returned != 90 || !near(sp.CallP50, 0.4) || !near(sp.DispatchP50, 0.1) || !near(sp.SlowCall, 6) || !near(sp.SlowDispatch, 1.5) {
		t.Fatalf("split %+v: want 90 claim returns, p50s 0.4 and 0.1 ms, the slowest 2%%'s 6 and 1.5 ms", sp)
	}
	if got := (PickupSplit{}).String(); got != "no job has a claim time" {
		t.Errorf("empty split prints %q", got)
	}
}

// Order marks a job overtaken when a higher id committed before it, and
// counts the overtaken among the slowest 1%.
func TestPickupOrder(t *testing.T) {
	base := time.Unix(1000, 0)
	r := NewPickupRecorder(base, 201)
	at := func(ms float64) int64 { return int64(time.Duration(ms*float64(time.Millisecond))) + 1 }
	for seq := range int64(200) {
		id, commit, pickup := seq+1, float64(seq), 1.0
		switch seq {
		case 10, 11: // ids 12 and 11 commit in that order: 11 is overtaken
			id = 22 - seq
		case 50, 51: // the same instant: neither is overtaken
			commit = 50
		}
		if seq == 11 {
			pickup = 40 // the overtaken job is the slowest
		}
		if seq == 199 {
			pickup = 30 // the second slowest, in order
		}
		r.commit[seq].Store(at(commit))
		r.start[seq].Store(at(commit + pickup))
		r.InsertedAs(seq, id)
	}
	r.commit[200].Store(at(300)) // no id: left out
	r.start[200].Store(at(301))
	o := r.Order(201)
	if o.Jobs != 200 || o.Overtaken != 1 || o.Slowest != 2 || o.SlowOvertaken != 1 {
		t.Fatalf("order %+v: want 200 jobs, 1 overtaken, 1 of the slowest 2", o)
	}
	if o.SlowFrom != 30*time.Millisecond || o.OvertakenP99 != 40*time.Millisecond || o.InOrderP99 != time.Millisecond {
		t.Fatalf("order %+v: want the slowest from 30 ms, p99s 40 ms overtaken and 1 ms in order", o)
	}
	if got := (PickupOrder{}).String(); got != "no job has an id" {
		t.Errorf("empty order prints %q", got)
	}
}
