package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// stat is the median, minimum and maximum of a measure over repetitions.
type stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{Median: med, Min: s[0], Max: s[len(s)-1]}
}

// summaryRow is one contestant's figures in one scenario.
type summaryRow struct {
	Scenario string    `json:"scenario"`
	System   string    `json:"system"`
	Method   string    `json:"method,omitempty"`
	Store    storeKind `json:"store"`
	Runs     int       `json:"runs"`
	Failed   int       `json:"failed"`
	// JobsPerS: drain and insert.
	JobsPerS *stat `json:"jobs_per_s,omitempty"`
	// Steady: latency percentiles (ms) and the achieved insert rate.
	P50          *stat `json:"p50_ms,omitempty"`
	P95          *stat `json:"p95_ms,omitempty"`
	P99          *stat `json:"p99_ms,omitempty"`
	P999         *stat `json:"p99_9_ms,omitempty"`
	Max          *stat `json:"max_ms,omitempty"`
	AchievedRate *stat `json:"achieved_rate,omitempty"`
	// Versus names the Spool row this one is compared with; the ratios are
	// Spool's median over this row's (throughput: above 1 means Spool is
	// faster; latency: below 1 means Spool is quicker).
	Versus     string  `json:"versus,omitempty"`
	Ratio      float64 `json:"spool_over_peer,omitempty"`
	RatioP50   float64 `json:"spool_over_peer_p50,omitempty"`
	RatioP99   float64 `json:"spool_over_peer_p99,omitempty"`
	sys        *system
	methodName string
}

// summarizeRuns groups the records by contestant, in the order the
// contestants were planned, and computes the ratios to Spool.
func summarizeRuns(cfg *config, records []runRecord) []*summaryRow {
	var rows []*summaryRow
	for _, scenario := range cfg.scenarios {
		byKey := map[string]*summaryRow{}
		values := map[string]map[string][]float64{}
		for _, e := range cfg.entries(scenario) {
			key := e.sys.name + "/" + e.method
			r := &summaryRow{Scenario: scenario, System: e.sys.name, Method: e.method, Store: e.sys.store, sys: e.sys}
			if e.method != "" {
				r.methodName = methodName(e.sys, e.method)
			}
			byKey[key], values[key] = r, map[string][]float64{}
			rows = append(rows, r)
		}
		for _, rec := range records {
			if rec.Scenario != scenario {
				continue
			}
			key := rec.System + "/" + rec.Method
			r, v := byKey[key], values[key]
			if r == nil {
				continue
			}
			r.Runs++
			if rec.Error != "" || rec.Result == nil {
				r.Failed++
				continue
			}
			res := rec.Result
			if res.Latency != nil {
				v["p50"] = append(v["p50"], res.Latency.P50)
				v["p95"] = append(v["p95"], res.Latency.P95)
				v["p99"] = append(v["p99"], res.Latency.P99)
				v["p999"] = append(v["p999"], res.Latency.P999)
				v["max"] = append(v["max"], res.Latency.Max)
				v["rate"] = append(v["rate"], res.AchievedRate)
			} else {
				v["jobs"] = append(v["jobs"], res.JobsPerS)
			}
		}
		for key, r := range byKey {
			v := values[key]
			set := func(dst **stat, name string) {
				if len(v[name]) > 0 {
					s := statOf(v[name])
					*dst = &s
				}
			}
			set(&r.JobsPerS, "jobs")
			set(&r.P50, "p50")
			set(&r.P95, "p95")
			set(&r.P99, "p99")
			set(&r.P999, "p999")
			set(&r.Max, "max")
			set(&r.AchievedRate, "rate")
		}
		for _, r := range byKey {
			if r.sys.spool == "" {
				continue
			}
			base := byKey[r.sys.spool+"/"+r.Method]
			if base == nil && r.Method != "" {
				base = byKey[r.sys.spool+"/"+methodMany]
			}
			if base == nil && r.Method != "" {
				// A Spool variant without inserts of its own (spool-delete
				// inserts as spool does).
				base = byKey["spool/"+methodMany]
			}
			if base == nil {
				continue
			}
			r.Versus = base.System
			if base.methodName != "" {
				r.Versus += " " + base.methodName
			}
			r.Ratio = ratio(base.JobsPerS, r.JobsPerS)
			r.RatioP50 = ratio(base.P50, r.P50)
			r.RatioP99 = ratio(base.P99, r.P99)
		}
	}
	return rows
}

func ratio(spool, peer *stat) float64 {
	if spool == nil || peer == nil || peer.Median == 0 {
		return 0
	}
	return spool.Median / peer.Median
}

// lowRate is the fraction of the asked steady rate below which a row is
// flagged: its latency was measured at a lower load.
const lowRate = 0.95

// printReport writes the tables, one per scenario, then the settings and
// versions each system ran with.
func printReport(w io.Writer, cfg *config, rows []*summaryRow, records []runRecord) error {
	for _, scenario := range cfg.scenarios {
		short := false
		fmt.Fprintln(w, scenarioTitle(cfg, scenario))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		if scenario == scenarioSteady {
			fmt.Fprintln(tw, "system\tstore\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\tinserted/s\tspool/peer p50\tspool/peer p99\truns\t")
		} else {
			fmt.Fprintln(tw, "system\tstore\tmedian jobs/s\tmin\tmax\tspool/peer\truns\t")
		}
		for _, r := range rows {
			if r.Scenario != scenario {
				continue
			}
			name := r.System
			if r.methodName != "" {
				name += " " + r.methodName
			}
			runs := fmt.Sprint(r.Runs)
			if r.Failed > 0 {
				runs = fmt.Sprintf("%d (%d failed)", r.Runs, r.Failed)
			}
			if scenario == scenarioSteady {
				achieved := med(r.AchievedRate)
				if r.AchievedRate != nil && r.AchievedRate.Median < lowRate*cfg.rate {
					achieved += " *"
					short = true
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.Store,
					ms(r.P50), ms(r.P95), ms(r.P99), ms(r.P999), ms(r.Max), achieved,
					times(r.RatioP50), times(r.RatioP99), runs)
				continue
			}
			lo, hi := "-", "-"
			if r.JobsPerS != nil {
				lo, hi = humanInt(r.JobsPerS.Min), humanInt(r.JobsPerS.Max)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, r.Store, med(r.JobsPerS), lo, hi, times(r.Ratio), runs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if short {
			fmt.Fprintf(w, "* the inserter fell short of %s jobs/s: that system's latency is at a lower load than asked\n", humanInt(cfg.rate))
		}
		fmt.Fprintln(w)
	}
	printSettings(w, cfg, records)
	printFailures(w, records)
	return nil
}

func scenarioTitle(cfg *config, scenario string) string {
	reps := fmt.Sprintf("%d run(s) each, alternating, fresh database per run", cfg.reps)
	switch scenario {
	case scenarioDrain:
		return fmt.Sprintf("drain: %s no-op jobs inserted, then worked by one client until every completion is written (%d workers; %s)",
			humanInt(float64(cfg.jobs)), cfg.workers, reps)
	case scenarioInsert:
		return fmt.Sprintf("insert: %s jobs in calls of %s (%s)", humanInt(float64(cfg.insertJobs)), humanInt(float64(cfg.chunk)), reps)
	default:
		return fmt.Sprintf("steady: %s jobs/s for %s after %s warm-up, one job per insert transaction from a second client; "+
			"pickup latency = insert commit to handler start, medians over runs (%d workers; %s)",
			humanInt(cfg.rate), cfg.duration, cfg.warmup, cfg.workers, reps)
	}
}

// printSettings lists each system's version and settings, from its first
// successful run, with the reasons from the systems table.
func printSettings(w io.Writer, cfg *config, records []runRecord) {
	fmt.Fprintln(w, "systems and settings:")
	for _, s := range cfg.systems {
		var res *runResult
		for i := range records {
			if records[i].System == s.name && records[i].Result != nil {
				res = records[i].Result
				break
			}
		}
		version := "(no successful run)"
		if res != nil {
			version = res.Version
		}
		fmt.Fprintf(w, "  %s: %s\n    %s\n", s.name, version, s.about)
		if res != nil {
			keys := make([]string, 0, len(res.Settings))
			for k := range res.Settings {
				if k != "method" && k != "chunk" {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + res.Settings[k]
			}
			fmt.Fprintf(w, "    %s\n", strings.Join(parts, "; "))
		}
	}
}

func printFailures(w io.Writer, records []runRecord) {
	for _, r := range records {
		if r.Error != "" {
			fmt.Fprintf(w, "FAILED %s %s rep %d: %s\n", r.Scenario, r.System, r.Rep, r.Error)
		}
	}
}

func med(s *stat) string {
	if s == nil {
		return "-"
	}
	return humanInt(s.Median)
}

func ms(s *stat) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", s.Median)
}

func times(r float64) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", r)
}

// humanInt formats a number rounded to an integer with thousands separators.
func humanInt(f float64) string {
	n := int64(math.Round(f))
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + humanInt(-f)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
