package scenarios

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// The checker of lab chaos: it reads what the worker processes wrote to
// their audit logs (every handler start and return, every heartbeat that
// extended a lease), the final rows of the jobs and effect tables, and the
// faults injected, and counts every breach of what Spool promises.

// chaosStart is one handler start, as its process recorded it before running
// the handler.
type chaosStart struct {
	ID      int64
	Fence   int32
	Attempt int16
	Proc    string
	At      time.Time
	// LeasedUntil is the lease end of the claim, on the database clock, as
	// the claimed row carried it.
	LeasedUntil time.Time
	// DBLeasedUntil is the lease end the row had when read just after the
	// start, if it was still running under this fence (a heartbeat or, on
	// SQLite, a stall credit may have extended it); zero otherwise.
	DBLeasedUntil time.Time
}

// chaosEnd is one handler return.
type chaosEnd struct {
	ID    int64
	Fence int32
	Proc  string
	At    time.Time
}

// chaosBeat is a heartbeat that extended a lease: the lease then held at
// least until LiveUntil (the time the heartbeat was sent plus the lease, a
// lower bound of what the database set).
type chaosBeat struct {
	ID        int64
	Fence     int32
	LiveUntil time.Time
}

// chaosJob is a job's final row.
type chaosJob struct {
	ID          int64
	Seq         int64
	State       backend.State
	Fence       int32
	FinalizedAt *time.Time
	// Effect: the handler completes it only with CompleteTx and an effect row.
	Effect bool
	// Kind, BatchID and Role (a batch callback's condition) serve the
	// composed workloads' checks; Untracked marks a job no insert
	// acknowledged one by one (a callback, a debounced job), left out of
	// the accounting.
	Kind      string
	BatchID   int64
	Role      string
	Untracked bool
	// Rescues are when rescue returned the job to the queue after its lease
	// ended (the time of each "lease expired" entry of its error history,
	// on the store's clock: one machine's clock here).
	Rescues []time.Time
}

// chaosEffect is one row of the effect table, written with CompleteTx.
type chaosEffect struct {
	ID    int64
	Fence int32
}

// chaosFault is one injected fault.
type chaosFault struct {
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Procs are the worker processes it hit; empty means all (a server
	// restart or connection kill).
	Procs  []string `json:"procs,omitempty"`
	Detail string   `json:"detail,omitempty"`
}

// chaosClaim is a job a process claimed (its handler may not have started).
type chaosClaim struct {
	ID    int64
	Fence int32
	Proc  string
	At    time.Time
}

// chaosAudit is everything the checker reads.
type chaosAudit struct {
	Claims  []chaosClaim
	Starts  []chaosStart
	Ends    []chaosEnd
	Beats   []chaosBeat
	Jobs    []chaosJob
	Effects []chaosEffect
	// Acked are the sequence numbers of the jobs whose insert was
	// acknowledged to the producer; Unacked those whose insert returned an
	// error (it may have committed anyway).
	Acked   []int64
	Unacked []int64
	Faults  []chaosFault
	// StepRuns, Passes and Timeouts are the steps jobs' step function
	// runs, passes of waits and signal timeouts; WorkerViolations what a
	// handler found wrong (a callback that saw its batch unfinished, a
	// wrong signal payload).
	StepRuns         []stepRun
	Passes           []waitPass
	Timeouts         []int64
	WorkerViolations []string
	// Malformed counts audit lines that did not parse.
	Malformed int
	// BusyUntil is when the producer inserted its last job: the longest
	// start gap is measured up to it, not over the idle tail of the run.
	BusyUntil time.Time
}

// recoveryStats summarises, for one kind of fault, how long after the fault
// the jobs it interrupted started again, and where that time went.
type recoveryStats struct {
	Faults int `json:"faults"`
	// Jobs is how many interrupted jobs started again; P50MS, P99MS and
	// MaxMS are the times from the fault to their next start.
	Jobs  int     `json:"jobs_restarted"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// FaultToRescue is, for the interrupted jobs rescue returned to the
	// queue (their lease ran out), the time from the fault to that rescue;
	// RescueToClaim the time from the rescue to the claim that took the job
	// again; ClaimToStart the time from that claim to the next start (every
	// interrupted job, rescued or handed back by its process).
	FaultToRescue phaseStats `json:"fault_to_rescue"`
	RescueToClaim phaseStats `json:"rescue_to_claim"`
	ClaimToStart  phaseStats `json:"claim_to_start"`
	// FirstStartMS is the longest time, over the faults of this kind, from
	// the fault to the next handler start anywhere.
	FirstStartMS float64 `json:"first_start_after_ms"`
}

// phaseStats summarises one phase of recovery over the jobs it applies to.
type phaseStats struct {
	Jobs  int     `json:"jobs"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

func phaseOf(ds []time.Duration) phaseStats {
	st := bench.Summarize(ds)
	return phaseStats{Jobs: st.Count, P50MS: st.P50, P99MS: st.P99, MaxMS: st.Max}
}

// chaosCheck is the checker's verdict.
type chaosCheck struct {
	Enqueued  int64 `json:"enqueued"`
	Completed int64 `json:"completed"`
	Discarded int64 `json:"discarded"`
	// Cancelled: workflow tasks a failed dependency cancelled (a plain job
	// cancelled counts as lost: nothing cancels one).
	Cancelled int64 `json:"cancelled"`
	Pending   int64 `json:"pending"`
	// Lost = Enqueued − Completed − Discarded − Cancelled − Pending:
	// acknowledged jobs with no row.
	Lost int64 `json:"lost"`
	// CommittedUnacked counts jobs whose insert failed for the producer but
	// committed (a connection cut after the commit): not a breach.
	CommittedUnacked int64 `json:"committed_unacknowledged_inserts"`
	Starts           int64 `json:"handler_starts"`
	JobsRunTwice     int64 `json:"jobs_started_more_than_once"`
	MalformedAudit   int   `json:"malformed_audit_lines"`
	// LongestStartGapMS is the longest time no handler started anywhere,
	// from the first start until the producer's last insert: stalls show
	// here.
	LongestStartGapMS float64 `json:"longest_start_gap_ms"`

	RunsAfterCommittedCompletion int64 `json:"runs_after_committed_completion"`
	StaleCompletionsAccepted     int64 `json:"stale_completions_accepted"`
	OverlappingLiveLeases        int64 `json:"overlapping_live_leases"`
	LateStarts                   int64 `json:"late_starts"`
	// LateByClaimLiveInDB counts starts past the claim's lease end whose
	// lease the database had extended (not a breach).
	LateByClaimLiveInDB int64 `json:"late_by_claim_live_in_db"`
	DuplicateEffects    int64 `json:"duplicate_effects"`
	MissingEffects      int64 `json:"missing_effects"`

	Recovery map[string]recoveryStats `json:"recovery"`
	// Violations names each invariant that failed; empty when all held.
	Violations []string `json:"violations"`
	// Examples shows a few instances of each violation.
	Examples []string `json:"examples,omitempty"`
}

// OK reports whether every invariant held.
func (c *chaosCheck) OK() bool { return len(c.Violations) == 0 }

type leaseKey struct {
	id    int64
	fence int32
}

// checkChaos runs every check over a.
func checkChaos(a *chaosAudit) *chaosCheck {
	c := &chaosCheck{Recovery: map[string]recoveryStats{}, Violations: []string{}, MalformedAudit: a.Malformed, Starts: int64(len(a.Starts))}
	examples := map[string]int{}
	example := func(name, format string, args ...any) {
		if examples[name] < 5 {
			examples[name]++
			c.Examples = append(c.Examples, name+": "+fmt.Sprintf(format, args...))
		}
	}

	// Accounting, by sequence number: each acknowledged job counts once, in
	// the best state any of its rows reached.
	rank := func(j *chaosJob) int {
		switch j.State {
		case backend.StateCompleted:
			return 4
		case backend.StateDiscarded:
			return 3
		case backend.StateCancelled:
			// Only a workflow's failure policy cancels (composed jobs,
			// whose end checkCompose checks); a plain job cancelled is lost.
			if composeKinds[j.Kind] {
				return 2
			}
		case backend.StateWaiting, backend.StateAvailable, backend.StateScheduled, backend.StateRetryable, backend.StateRunning:
			return 1
		}
		return 0
	}
	best := map[int64]int{}
	jobs := make(map[int64]*chaosJob, len(a.Jobs))
	for i := range a.Jobs {
		j := &a.Jobs[i]
		jobs[j.ID] = j
		if j.Untracked {
			continue
		}
		if r, ok := best[j.Seq]; !ok || rank(j) > r {
			best[j.Seq] = rank(j)
		}
	}
	acked := make(map[int64]bool, len(a.Acked))
	for _, seq := range a.Acked {
		if acked[seq] {
			continue
		}
		acked[seq] = true
		c.Enqueued++
		switch best[seq] {
		case 4:
			c.Completed++
		case 3:
			c.Discarded++
		case 2:
			c.Cancelled++
		case 1:
			c.Pending++
		default:
			c.Lost++
			example("lost", "job seq %d acknowledged but not found completed, discarded, cancelled or pending", seq)
		}
	}
	for seq := range best {
		if !acked[seq] {
			c.CommittedUnacked++
		}
	}

	// Starts after the commit of the job's completion, and late starts.
	byJob := map[int64][]chaosStart{}
	for _, s := range a.Starts {
		byJob[s.ID] = append(byJob[s.ID], s)
		if j := jobs[s.ID]; j != nil && j.State == backend.StateCompleted && j.FinalizedAt != nil && s.At.After(*j.FinalizedAt) {
			c.RunsAfterCommittedCompletion++
			example("runs_after_committed_completion", "job %d fence %d started by %s at %s, %s after its completion committed",
				s.ID, s.Fence, s.Proc, s.At.Format(time.RFC3339Nano), s.At.Sub(*j.FinalizedAt))
		}
		if !s.At.Before(s.LeasedUntil) {
			if s.At.Before(s.DBLeasedUntil) {
				// Past the claim's lease end, but the database had extended
				// the lease: it was live.
				c.LateByClaimLiveInDB++
				continue
			}
			c.LateStarts++
			example("late_starts", "job %d fence %d started by %s %s after its lease ended", s.ID, s.Fence, s.Proc, s.At.Sub(s.LeasedUntil))
		}
	}
	for _, ss := range byJob {
		if len(ss) > 1 {
			c.JobsRunTwice++
		}
	}

	// Effects: one per job, under the fence the job completed with.
	effects := map[int64][]int32{}
	for _, e := range a.Effects {
		effects[e.ID] = append(effects[e.ID], e.Fence)
	}
	for id, fences := range effects {
		if len(fences) > 1 {
			c.DuplicateEffects += int64(len(fences) - 1)
			example("duplicate_effects", "job %d has %d effect rows (fences %v)", id, len(fences), fences)
		}
		j := jobs[id]
		for _, f := range fences {
			if j == nil || j.State != backend.StateCompleted || f != j.Fence {
				c.StaleCompletionsAccepted++
				if j == nil {
					example("stale_completions_accepted", "effect row for job %d, which has no row", id)
				} else {
					example("stale_completions_accepted", "effect row for job %d under fence %d; the job is %s under fence %d", id, f, j.State, j.Fence)
				}
			}
		}
	}
	for _, j := range a.Jobs {
		if j.Effect && j.State == backend.StateCompleted && len(effects[j.ID]) == 0 {
			c.MissingEffects++
			example("missing_effects", "job %d completed without its effect row", j.ID)
		}
	}

	// Overlapping live leases: two claims of one job whose live intervals,
	// [handler start, the earlier of the handler's return and the lease end
	// known to the database], intersect.
	ends := map[leaseKey]time.Time{}
	for _, e := range a.Ends {
		k := leaseKey{e.ID, e.Fence}
		if t, ok := ends[k]; !ok || e.At.Before(t) {
			ends[k] = e.At
		}
	}
	liveUntil := map[leaseKey]time.Time{}
	for _, b := range a.Beats {
		k := leaseKey{b.ID, b.Fence}
		if b.LiveUntil.After(liveUntil[k]) {
			liveUntil[k] = b.LiveUntil
		}
	}
	liveEnd := func(s chaosStart) time.Time {
		end := s.LeasedUntil
		if t := liveUntil[leaseKey{s.ID, s.Fence}]; t.After(end) {
			end = t
		}
		if t, ok := ends[leaseKey{s.ID, s.Fence}]; ok && t.Before(end) {
			end = t
		}
		return end
	}
	for id, ss := range byJob {
		for i := range ss {
			for k := i + 1; k < len(ss); k++ {
				x, y := ss[i], ss[k]
				if x.Fence == y.Fence {
					c.OverlappingLiveLeases++
					example("overlapping_live_leases", "job %d fence %d started twice (%s, %s)", id, x.Fence, x.Proc, y.Proc)
					continue
				}
				xe, ye := liveEnd(x), liveEnd(y)
				if x.At.Before(xe) && y.At.Before(ye) && x.At.Before(ye) && y.At.Before(xe) {
					c.OverlappingLiveLeases++
					example("overlapping_live_leases", "job %d: fence %d (%s) live %s..%s and fence %d (%s) live %s..%s",
						id, x.Fence, x.Proc, x.At.Format("15:04:05.000"), xe.Format("15:04:05.000"),
						y.Fence, y.Proc, y.At.Format("15:04:05.000"), ye.Format("15:04:05.000"))
				}
			}
		}
	}

	c.Recovery = recoveries(a, byJob, ends)
	sorted := sortedStarts(a.Starts)
	for i := 1; i < len(sorted); i++ {
		if !a.BusyUntil.IsZero() && sorted[i-1].At.After(a.BusyUntil) {
			break
		}
		c.LongestStartGapMS = max(c.LongestStartGapMS, bench.MS(sorted[i].At.Sub(sorted[i-1].At)))
	}

	c.Violations = violated(c.invariants())
	if c.Pending != 0 {
		c.Violations = append(c.Violations, fmt.Sprintf("pending_after_drain=%d", c.Pending))
	}
	return c
}

// namedCount is an invariant's counter: a breach when not zero.
type namedCount struct {
	name string
	n    int64
}

// invariants lists the invariant counters of c, by name.
func (c *chaosCheck) invariants() []namedCount {
	return []namedCount{
		{"lost", c.Lost},
		{"runs_after_committed_completion", c.RunsAfterCommittedCompletion},
		{"stale_completions_accepted", c.StaleCompletionsAccepted},
		{"overlapping_live_leases", c.OverlappingLiveLeases},
		{"late_starts", c.LateStarts},
		{"duplicate_effects", c.DuplicateEffects},
		{"missing_effects", c.MissingEffects},
	}
}

// violated names each counter of vs that is not zero, with its count.
func violated(vs []namedCount) []string {
	out := []string{}
	for _, v := range vs {
		if v.n != 0 {
			out = append(out, fmt.Sprintf("%s=%d", v.name, v.n))
		}
	}
	return out
}

// printInvariants writes one line per counter of vs to tw, marked ok or
// FAIL.
func printInvariants(tw io.Writer, vs []namedCount) {
	for _, v := range vs {
		mark := "ok"
		if v.n != 0 {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", v.name, v.n, mark)
	}
}

// sortedStarts returns the starts in time order.
func sortedStarts(ss []chaosStart) []chaosStart {
	out := slices.Clone(ss)
	sort.Slice(out, func(i, k int) bool { return out[i].At.Before(out[k].At) })
	return out
}

// recoveries measures, per fault kind, the time from each fault to the next
// start of every job it interrupted (a job whose handler was running, in a
// process the fault hit, and that had to start again), and splits it: fault
// to rescue (for jobs whose lease ran out), rescue to the claim that took
// the job again, that claim to the start.
func recoveries(a *chaosAudit, byJob map[int64][]chaosStart, ends map[leaseKey]time.Time) map[string]recoveryStats {
	type phases struct{ total, toRescue, toClaim, toStart []time.Duration }
	samples := map[string]*phases{}
	out := map[string]recoveryStats{}
	starts := sortedStarts(a.Starts)
	held := slices.Clone(a.Claims)
	claimsOf := map[int64][]chaosClaim{}
	for _, c := range a.Claims {
		claimsOf[c.ID] = append(claimsOf[c.ID], c)
	}
	rescuesOf := map[int64][]time.Time{}
	for _, j := range a.Jobs {
		if len(j.Rescues) > 0 {
			rescuesOf[j.ID] = j.Rescues
		}
	}
	for _, s := range a.Starts {
		held = append(held, chaosClaim{ID: s.ID, Fence: s.Fence, Proc: s.Proc, At: s.At})
	}
	for _, f := range a.Faults {
		r := out[f.Kind]
		r.Faults++
		if i := sort.Search(len(starts), func(i int) bool { return starts[i].At.After(f.At) }); i < len(starts) {
			r.FirstStartMS = max(r.FirstStartMS, bench.MS(starts[i].At.Sub(f.At)))
		}
		out[f.Kind] = r
		hit := map[string]bool{}
		for _, p := range f.Procs {
			hit[p] = true
		}
		ph := samples[f.Kind]
		if ph == nil {
			ph = &phases{}
			samples[f.Kind] = ph
		}
		// Jobs held at the fault by a process it hit: claimed or started
		// before it, not returned by then, and not claimed again since (a
		// job that failed and was claimed again is held by its new claim).
		seen := map[int64]bool{}
		for _, h := range held {
			if h.At.After(f.At) || (len(hit) > 0 && !hit[h.Proc]) || seen[h.ID] {
				continue
			}
			if end, ok := ends[leaseKey{h.ID, h.Fence}]; ok && !end.After(f.At) {
				continue
			}
			if claimedAgainBy(claimsOf[h.ID], h.Fence, f.At) {
				continue
			}
			// When did it start again?
			var next chaosStart
			for _, t := range byJob[h.ID] {
				if t.Fence > h.Fence && t.At.After(f.At) && (next.At.IsZero() || t.At.Before(next.At)) {
					next = t
				}
			}
			if next.At.IsZero() {
				continue
			}
			seen[h.ID] = true
			ph.total = append(ph.total, next.At.Sub(f.At))
			// The claim of that start, and the last rescue before it since
			// the job was held.
			var claim time.Time
			for _, c := range claimsOf[h.ID] {
				if c.Fence == next.Fence {
					claim = c.At
				}
			}
			if claim.IsZero() {
				continue
			}
			ph.toStart = append(ph.toStart, next.At.Sub(claim))
			var rescue time.Time
			for _, t := range rescuesOf[h.ID] {
				if t.After(h.At) && !t.After(claim) && t.After(rescue) {
					rescue = t
				}
			}
			if rescue.IsZero() {
				continue // handed back by its process, not rescued
			}
			ph.toRescue = append(ph.toRescue, max(0, rescue.Sub(f.At)))
			ph.toClaim = append(ph.toClaim, claim.Sub(rescue))
		}
	}
	for kind, ph := range samples {
		st := bench.Summarize(ph.total)
		r := out[kind]
		r.Jobs, r.P50MS, r.P99MS, r.MaxMS = st.Count, st.P50, st.P99, st.Max
		r.FaultToRescue, r.RescueToClaim, r.ClaimToStart = phaseOf(ph.toRescue), phaseOf(ph.toClaim), phaseOf(ph.toStart)
		out[kind] = r
	}
	return out
}

// claimedAgainBy reports whether one of a job's claims took it under a
// fence above fence, at or before t.
func claimedAgainBy(claims []chaosClaim, fence int32, t time.Time) bool {
	for _, c := range claims {
		if c.Fence > fence && !c.At.After(t) {
			return true
		}
	}
	return false
}

// Audit log lines, one write() each, space-separated:
//
//	S <id> <fence> <attempt> <start ns> <leased-until ns> <proc> <db leased-until ns or 0>
//	E <id> <fence> <return ns> <proc>
//	H <live-until ns> <id>:<fence> ...
//	C <claim ns> <proc> <id>:<fence> ...
//	X <id> <proc>   (a handler that ignores its context started)
//	R <id> <fence> <step>   (a steps job's step function ran)
//	G <id> <fence> sleep|signal <ns>   (a steps job's handler got past a wait)
//	T <id>   (a signal wait timed out)
//	V <id> <what ...>   (a handler found something wrong)

// formatStart formats a start record.
func formatStart(s chaosStart) string {
	db := int64(0)
	if !s.DBLeasedUntil.IsZero() {
		db = s.DBLeasedUntil.UnixNano()
	}
	return fmt.Sprintf("S %d %d %d %d %d %s %d\n", s.ID, s.Fence, s.Attempt, s.At.UnixNano(), s.LeasedUntil.UnixNano(), s.Proc, db)
}

// formatEnd formats a return record.
func formatEnd(e chaosEnd) string {
	return fmt.Sprintf("E %d %d %d %s\n", e.ID, e.Fence, e.At.UnixNano(), e.Proc)
}

// formatBeat formats the leases one heartbeat extended.
func formatBeat(liveUntil time.Time, leases []backend.LeaseRef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "H %d", liveUntil.UnixNano())
	for _, l := range leases {
		fmt.Fprintf(&b, " %d:%d", l.ID, l.Fence)
	}
	b.WriteByte('\n')
	return b.String()
}

// formatStubborn formats the mark of a handler that ignores its context.
func formatStubborn(id int64, proc string) string { return fmt.Sprintf("X %d %s\n", id, proc) }

// formatClaim formats the jobs one claim returned.
func formatClaim(at time.Time, proc string, rows []*backend.JobRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "C %d %s", at.UnixNano(), proc)
	for _, r := range rows {
		fmt.Fprintf(&b, " %d:%d", r.ID, r.Fence)
	}
	b.WriteByte('\n')
	return b.String()
}

// readAudit adds the records of one audit log to a. A line that does not
// parse (none should: each is one write) is counted, not fatal.
func readAudit(r io.Reader, a *chaosAudit) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if !parseAuditLine(f, a) {
			a.Malformed++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	return nil
}

func parseAuditLine(f []string, a *chaosAudit) bool {
	if len(f) == 0 {
		return false
	}
	num := func(s string) (int64, bool) {
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil
	}
	switch f[0] {
	case "S":
		if len(f) != 7 && len(f) != 8 {
			return false
		}
		var dbLU time.Time
		if len(f) == 8 {
			v, ok := num(f[7])
			if !ok {
				return false
			}
			if v != 0 {
				dbLU = time.Unix(0, v)
			}
		}
		id, ok1 := num(f[1])
		fence, ok2 := num(f[2])
		att, ok3 := num(f[3])
		at, ok4 := num(f[4])
		lu, ok5 := num(f[5])
		if !(ok1 && ok2 && ok3 && ok4 && ok5) {
			return false
		}
		a.Starts = append(a.Starts, chaosStart{ID: id, Fence: int32(fence), Attempt: int16(att), At: time.Unix(0, at), LeasedUntil: time.Unix(0, lu), Proc: f[6], DBLeasedUntil: dbLU})
	case "E":
		if len(f) != 5 {
			return false
		}
		id, ok1 := num(f[1])
		fence, ok2 := num(f[2])
		at, ok3 := num(f[3])
		if !(ok1 && ok2 && ok3) {
			return false
		}
		a.Ends = append(a.Ends, chaosEnd{ID: id, Fence: int32(fence), At: time.Unix(0, at), Proc: f[4]})
	case "H":
		if len(f) < 2 {
			return false
		}
		lu, ok := num(f[1])
		if !ok {
			return false
		}
		for _, l := range f[2:] {
			idS, fenceS, found := strings.Cut(l, ":")
			id, ok1 := num(idS)
			fence, ok2 := num(fenceS)
			if !found || !ok1 || !ok2 {
				return false
			}
			a.Beats = append(a.Beats, chaosBeat{ID: id, Fence: int32(fence), LiveUntil: time.Unix(0, lu)})
		}
	case "X":
		return len(f) == 3
	case "R":
		if len(f) != 4 {
			return false
		}
		id, ok1 := num(f[1])
		fence, ok2 := num(f[2])
		if !(ok1 && ok2) {
			return false
		}
		a.StepRuns = append(a.StepRuns, stepRun{ID: id, Fence: int32(fence), Name: f[3]})
	case "G":
		if len(f) != 5 {
			return false
		}
		id, ok1 := num(f[1])
		fence, ok2 := num(f[2])
		at, ok3 := num(f[4])
		if !(ok1 && ok2 && ok3) {
			return false
		}
		a.Passes = append(a.Passes, waitPass{ID: id, Fence: int32(fence), What: f[3], At: time.Unix(0, at)})
	case "T":
		if len(f) != 2 {
			return false
		}
		id, ok := num(f[1])
		if !ok {
			return false
		}
		a.Timeouts = append(a.Timeouts, id)
	case "V":
		if len(f) < 3 {
			return false
		}
		a.WorkerViolations = append(a.WorkerViolations, strings.Join(f[2:], " ")+" (job "+f[1]+")")
	case "C":
		if len(f) < 3 {
			return false
		}
		at, ok := num(f[1])
		if !ok {
			return false
		}
		for _, l := range f[3:] {
			idS, fenceS, found := strings.Cut(l, ":")
			id, ok1 := num(idS)
			fence, ok2 := num(fenceS)
			if !found || !ok1 || !ok2 {
				return false
			}
			a.Claims = append(a.Claims, chaosClaim{ID: id, Fence: int32(fence), Proc: f[2], At: time.Unix(0, at)})
		}
	default:
		return false
	}
	return true
}
