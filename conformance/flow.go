package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// flowArgs is the flow tests' payload: its flow key comes from its args.
type flowArgs struct {
	Key   string `json:"key,omitempty"`
	N     int    `json:"n"`
	Fail  int    `json:"fail,omitempty"`  // runs that fail before one succeeds (counted by the recorder: JobRetry's fresh attempts do not fail again)
	Sleep int    `json:"sleep,omitempty"` // milliseconds the handler holds its slot
}

func (flowArgs) Kind() string { return "flow" }

// FlowKey implements spool.JobArgsWithFlowKey.
func (a flowArgs) FlowKey() string { return a.Key }

// flowStart is one handler start seen by a flowRecorder.
type flowStart struct {
	key     string
	n       int
	attempt int
	at      time.Time
	running int // jobs of the same key running, this one included
	// claimed is when the job's claim ran, by the store's clock.
	claimed time.Time
}

// flowRecorder is a worker for flowArgs that records, across every client
// of a test, what runs at once: in all and per key.
type flowRecorder struct {
	mu      sync.Mutex
	running map[string]int
	total   int
	peak    int
	keyPeak map[string]int
	starts  []flowStart
	runs    map[int64]int // runs of each job id
	done    chan int
	// holdFor, when not zero, makes handlers wait (up to holdMax) until
	// that many jobs run at once; reached is closed then. A limit that is
	// reachable is then reached whatever the machine's load, and one that
	// is not shows as a lower peak.
	holdFor int
	reached chan struct{}
	// storeOf, when set, gives a job's store: running jobs are counted per
	// store too (storePeak), for a queue spread over stores.
	storeOf      func(id int64) int
	storeRunning map[int]int
	storePeak    map[int]int
}

// holdMax bounds a handler's wait for holdFor jobs running at once.
const holdMax = 5 * time.Second

func newFlowRecorder(jobs int) *flowRecorder {
	return &flowRecorder{running: map[string]int{}, keyPeak: map[string]int{}, runs: map[int64]int{}, done: make(chan int, jobs), reached: make(chan struct{}),
		storeRunning: map[int]int{}, storePeak: map[int]int{}}
}

func (r *flowRecorder) workers() *spool.Workers {
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(r.work))
	return ws
}

func (r *flowRecorder) work(ctx context.Context, j *spool.Job[flowArgs]) error {
	key := j.FlowKey
	store := -1
	if r.storeOf != nil {
		store = r.storeOf(j.ID)
	}
	r.mu.Lock()
	r.running[key]++
	r.total++
	if store >= 0 {
		r.storeRunning[store]++
		r.storePeak[store] = max(r.storePeak[store], r.storeRunning[store])
	}
	r.peak = max(r.peak, r.total)
	r.keyPeak[key] = max(r.keyPeak[key], r.running[key])
	r.runs[j.ID]++
	failRun := r.runs[j.ID] <= j.Args.Fail
	r.starts = append(r.starts, flowStart{key: key, n: j.Args.N, attempt: int(j.Attempt), at: time.Now(), running: r.running[key], claimed: *j.AttemptedAt})
	hold := r.holdFor > 0
	if hold && max(r.total, r.running[key]) >= r.holdFor {
		select {
		case <-r.reached:
		default:
			close(r.reached)
		}
	}
	r.mu.Unlock()
	if hold {
		select {
		case <-r.reached:
		case <-time.After(holdMax):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		r.mu.Lock()
		r.running[key]--
		r.total--
		if store >= 0 {
			r.storeRunning[store]--
		}
		r.mu.Unlock()
	}()
	if j.Args.Sleep > 0 {
		select {
		case <-time.After(time.Duration(j.Args.Sleep) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failRun {
		return fmt.Errorf("failing attempt %d as asked", j.Attempt)
	}
	r.done <- j.Args.N
	return nil
}

func (r *flowRecorder) snapshot() (peak int, keyPeak map[string]int, starts []flowStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak, maps(r.keyPeak), slices.Clone(r.starts)
}

// storePeaks returns the most jobs that ran at once on each store.
func (r *flowRecorder) storePeaks() map[int]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]int, len(r.storePeak))
	for s, n := range r.storePeak {
		out[s] = n
	}
	return out
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// waitDone waits for n successful runs.
func (r *flowRecorder) waitDone(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		recv(t, r.done, fmt.Sprintf("job %d of %d", i+1, n))
	}
}

// flowConfig is fastConfig with queue "flow" under f.
func flowConfig(ws *spool.Workers, workers int, f *spool.Flow) *spool.Config {
	cfg := fastConfig(ws, 1)
	cfg.Queues = map[string]spool.QueueConfig{"flow": {MaxWorkers: workers, Flow: f}}
	cfg.AllowUnknownKinds = true
	return cfg
}

// insertFlow inserts jobs into queue "flow" in one call, in order.
func insertFlow(t *testing.T, c *spool.Client, jobs ...flowArgs) []int64 {
	t.Helper()
	params := make([]spool.InsertManyParams, len(jobs))
	for i, a := range jobs {
		params[i] = spool.InsertManyParams{Args: a, InsertOpts: &spool.InsertOpts{Queue: "flow"}}
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert flow jobs: %v", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// flowClients starts n clients on handles of one store (each after the
// first through Reopen, as other processes), all with cfg.
func flowClients(t *testing.T, h Harness, be backend.Backend, n int, cfg func() *spool.Config) []*spool.Client {
	t.Helper()
	clients := make([]*spool.Client, n)
	for i := range clients {
		b := be
		if i > 0 {
			b = h.Reopen(t, be)
		}
		clients[i] = newClient(t, b, cfg())
		start(t, clients[i])
	}
	return clients
}

func testFlowGlobalLimit(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const jobs = 60
	rec := newFlowRecorder(jobs)
	// Three processes with five workers each share a limit of three.
	cfg := func() *spool.Config { return flowConfig(rec.workers(), 5, &spool.Flow{GlobalLimit: 3}) }
	ins := newClient(t, be, cfg())
	var batch []flowArgs
	for i := range jobs {
		batch = append(batch, flowArgs{N: i, Sleep: 15})
	}
	ids := insertFlow(t, ins, batch...)
	if sp := h.spread(); sp != nil {
		flowGlobalLimitPerStore(t, h, be, sp, rec, cfg, ids)
		return
	}
	flowClients(t, h, be, 3, cfg)
	rec.waitDone(t, jobs)
	peak, _, _ := rec.snapshot()
	if peak > 3 {
		t.Fatalf("%d jobs ran at once under a global limit of 3", peak)
	}
	if peak < 3 {
		t.Fatalf("at most %d jobs ran at once: the global limit of 3 was never reached with 15 workers", peak)
	}
}

// flowGlobalLimitPerStore checks a global limit of 3 where the jobs (without
// keys) are spread over stores that each keep the limit for their own: no
// store ever runs more than 3 of them, and with the first handlers waiting
// (up to holdMax) until every store could have 3 running (as many as the
// 15 workers allow), that many run at once: each store reaches its 3.
func flowGlobalLimitPerStore(t *testing.T, h Harness, be backend.Backend, sp *Spread, rec *flowRecorder, cfg func() *spool.Config, ids []int64) {
	stores := map[int]bool{}
	for _, id := range ids {
		stores[sp.StoreOf(be, id)] = true
	}
	want := min(3*len(stores), 15)
	rec.storeOf = func(id int64) int { return sp.StoreOf(be, id) }
	rec.holdFor = want
	flowClients(t, h, be, 3, cfg)
	rec.waitDone(t, len(ids))
	peak, _, _ := rec.snapshot()
	peaks := rec.storePeaks()
	for s, n := range peaks {
		if n > 3 {
			t.Fatalf("store %d ran %d jobs at once under a global limit of 3 (peaks by store %v)", s, n, peaks)
		}
	}
	if peak != want {
		t.Fatalf("at most %d jobs ran at once over %d stores under a limit of 3 each (peaks by store %v): want %d, each store at its limit", peak, len(stores), peaks, want)
	}
}

// Limits wide enough that a store may claim for several processes at once
// (backend.FlowQuick's striped rule, far from the limit) are still reached
// exactly and never passed once the claims near them.
func testFlowWideLimits(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		flow *spool.Flow
		key  string
	}{
		{"global", &spool.Flow{GlobalLimit: 16}, ""},
		{"per key", &spool.Flow{KeyLimit: 16}, "k"},
	} {
		if tc.key == "" && h.spread() != nil {
			// A queue-wide limit is the queue's on each store: with every
			// job under one key, all are on one store and it is exact.
			tc.key = "one-store"
		}
		t.Run(tc.name, func(t *testing.T) {
			be := h.NewBackend(t)
			const jobs = 300
			rec := newFlowRecorder(jobs)
			rec.holdFor = 16
			cfg := func() *spool.Config { return flowConfig(rec.workers(), 10, tc.flow) }
			ins := newClient(t, be, cfg())
			var batch []flowArgs
			for i := range jobs {
				batch = append(batch, flowArgs{Key: tc.key, N: i, Sleep: 20})
			}
			insertFlow(t, ins, batch...)
			// Three processes of ten workers and their prefetch want 30 and
			// more at once.
			flowClients(t, h, be, 3, cfg)
			rec.waitDone(t, jobs)
			peak, keyPeak, _ := rec.snapshot()
			if tc.flow.KeyLimit > 0 {
				peak = keyPeak[tc.key]
			}
			if peak != 16 {
				t.Fatalf("%d jobs ran at once under a limit of 16 (30 workers, the first handlers waiting up to %s for a sixteenth): want exactly 16", peak, holdMax)
			}
		})
	}
}

// A store that decides quick claims itself (backend.FlowQuick) keeps their
// rule exactly: a striped claim takes at most its stripe's share of a
// limit's lower half, and nothing once the running jobs leave no room for
// every stripe's share; a claim holding the whole lock then takes up to the
// limit. A store that does not decide them leaves FlowRunning.Quick nil and
// reads what the controller needs instead.
func testFlowQuickClaim(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	// Over stores that each keep the rule for their own jobs, the jobs are
	// put under one key, so all are on one store: the claims that find
	// nothing on the others reach it, and its rule is checked exactly.
	key := ""
	if h.spread() != nil {
		key = "one-store"
	}
	jobs := make([]*backend.JobInsertParams, 40)
	for i := range jobs {
		jobs[i] = &backend.JobInsertParams{Queue: "q", Kind: "k", FlowKey: key, Args: json.RawMessage(`{}`), MaxAttempts: 3}
	}
	if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	claim := func(q backend.FlowQuick) *backend.FlowQuickResult {
		t.Helper()
		var got *backend.FlowQuickResult
		err := be.JobClaimFlow(ctx, &backend.JobClaimFlowParams{Queue: "q", Lease: time.Minute, ClaimID: "test", Quick: &q},
			func(tx backend.FlowTx) error {
				run, err := tx.FlowRunning(ctx)
				if err == nil && run.Quick == nil && run.Live == nil {
					err = fmt.Errorf("a claim the store did not decide read no running jobs")
				}
				if err == nil {
					got = run.Quick
				}
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The queue's first claim, of nothing (a store may create the queue's
	// lock then, holding it whole).
	if got := claim(backend.FlowQuick{Limit: 16}); got == nil {
		t.Logf("the store does not decide quick claims: the controller decides them (the flow tests cover that)")
		return
	} else if len(got.Jobs) != 0 {
		t.Fatalf("a claim of nothing took %d jobs", len(got.Jobs))
	}
	// Limit 16, 4 stripes: a share of 16/8 = 2, while at most 16 - 4*2 = 8
	// run.
	for i, want := range []int{2, 2, 2, 2, 2, 0} {
		got := claim(backend.FlowQuick{Want: 5, Extra: 5, Limit: 16, Stripes: 4})
		if len(got.Jobs) != want || (want > 0 && !got.Striped) {
			t.Fatalf("striped claim %d took %d jobs (striped %v), want %d", i+1, len(got.Jobs), got.Striped, want)
		}
	}
	// 10 running: no room for every stripe's share. The whole lock lets the
	// workers' 5 run and no prefetch (the lower half, 8, is full).
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, Limit: 16}); got.Striped || len(got.Jobs) != 5 {
		t.Fatalf("whole-lock claim took %d jobs (striped %v), want 5", len(got.Jobs), got.Striped)
	}
	// A per-key limit counts the busiest key (here the jobs' one key, or
	// the jobs without one: 15 running): 24/8 = 3 a stripe, room needed 12, there is 9.
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, KeyLimit: 24, Stripes: 4}); len(got.Jobs) != 0 {
		t.Fatalf("striped claim under a key limit took %d jobs with 15 running of 24", len(got.Jobs))
	}
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, KeyLimit: 40, Stripes: 4}); len(got.Jobs) != 5 {
		t.Fatalf("striped claim under a key limit of 40 took %d jobs with 15 running, want its share 5", len(got.Jobs))
	}
	// Without stripes, under a per-key limit the busiest key could pass
	// with all that is asked: the store declines.
	if got := claim(backend.FlowQuick{Want: 5, Extra: 5, KeyLimit: 24}); got.Striped || len(got.Jobs) != 0 {
		t.Fatalf("whole-lock claim under a key limit of 24 with 20 running took %d jobs, want a decline", len(got.Jobs))
	}
}

func testFlowKilledWorkerSlotsReturn(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	rec := newFlowRecorder(10)
	cfg := func() *spool.Config {
		c := flowConfig(rec.workers(), 5, &spool.Flow{GlobalLimit: 2})
		c.RescueInterval = time.Hour // the slots must come back by lease end, not by rescue
		return c
	}
	c := newClient(t, be, cfg())
	// Over stores that each count the limit's slots for their own jobs,
	// the jobs are put under one key, so all are on one store, whose two
	// slots the killed worker holds.
	key := ""
	if h.spread() != nil {
		key = "one-store"
	}
	var batch []flowArgs
	for i := range 6 {
		batch = append(batch, flowArgs{Key: key, N: i})
	}
	ids := insertFlow(t, c, batch...)
	// A worker claims two jobs with a short lease and dies with them.
	const lease = 1500 * time.Millisecond
	rows, err := be.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "flow", Max: 2, Lease: lease, ClaimID: "killed#1"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim as the killed worker: %d rows, %v", len(rows), err)
	}
	// Until the first of its leases ends, by the store's clock, both slots
	// are the killed worker's: no claim may take another job. Claims are
	// compared on the store's clock (each start's claim time), not on this
	// process's, which a loaded machine delays by an unknown amount after
	// the leases began.
	var leaseEnd time.Time
	for _, r := range rows {
		if r.LeasedUntil == nil {
			t.Fatalf("killed worker's job %d claimed without a lease end", r.ID)
		}
		if leaseEnd.IsZero() || r.LeasedUntil.Before(leaseEnd) {
			leaseEnd = *r.LeasedUntil
		}
	}
	start(t, c)
	rec.waitDone(t, 4)
	for _, id := range ids {
		if id != rows[0].ID && id != rows[1].ID {
			waitState(t, be, id, backend.StateCompleted)
		}
	}
	_, _, starts := rec.snapshot()
	// Stores keep times to the millisecond at least; both sides are cut
	// to it so a store that rounds one of them is not taken for a claim
	// ahead of the lease's end.
	for _, s := range starts {
		if s.claimed.Truncate(time.Millisecond).Before(leaseEnd.Truncate(time.Millisecond)) {
			t.Fatalf("job %d was claimed at %s, while a killed worker's leases held both slots until %s",
				s.n, s.claimed.Format(time.StampMicro), leaseEnd.Format(time.StampMicro))
		}
	}
	use, err := c.FlowKeys(context.Background(), "flow", 0)
	if err != nil {
		t.Fatalf("flow keys: %v", err)
	}
	if len(use) != 1 || use[0].Running != 0 || use[0].Pending != 0 {
		t.Fatalf("flow use after the drain %+v, want the killed worker's jobs not counted as running (their leases ended) and none pending", use)
	}
}

func testFlowKeyLimit(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const perKey = 15
	rec := newFlowRecorder(3 * perKey)
	cfg := func() *spool.Config { return flowConfig(rec.workers(), 8, &spool.Flow{KeyLimit: 2}) }
	c := newClient(t, be, cfg())
	var batch []flowArgs
	for i := range perKey {
		for _, k := range []string{"a", "b"} {
			batch = append(batch, flowArgs{Key: k, N: i, Sleep: 10})
		}
	}
	insertFlow(t, c, batch...)
	// The third key comes from the insert options, over the args' own.
	for i := range perKey {
		if _, err := c.Insert(context.Background(), flowArgs{Key: "a", N: 100 + i, Sleep: 10}, &spool.InsertOpts{Queue: "flow", FlowKey: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	flowClients(t, h, be, 2, cfg)
	rec.waitDone(t, 3*perKey)
	peak, keyPeak, _ := rec.snapshot()
	for _, k := range []string{"a", "b", "c"} {
		if keyPeak[k] != 2 {
			t.Fatalf("key %q peaked at %d running, want exactly its limit 2 (peaks %v)", k, keyPeak[k], keyPeak)
		}
	}
	if peak < 4 {
		t.Fatalf("at most %d jobs ran at once: keys did not run side by side", peak)
	}
}

// testFlowRateLimit: a rate limit per flow key holds for each key (no
// Limit+1 starts of a key within Per, by the store's clock), and each key
// has a bucket of its own, so the keys start side by side.
func testFlowRateLimit(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	const perKey = 12
	rec := newFlowRecorder(2 * perKey)
	rate := &spool.RateLimit{Limit: 5, Per: 500 * time.Millisecond, Burst: 2}
	cfg := func() *spool.Config { return flowConfig(rec.workers(), 8, &spool.Flow{Rate: rate}) }
	c := newClient(t, be, cfg())
	var batch []flowArgs
	for i := range perKey {
		batch = append(batch, flowArgs{Key: "a", N: i}, flowArgs{Key: "b", N: i})
	}
	ids := insertFlow(t, c, batch...)
	flowClients(t, h, be, 2, cfg)
	rec.waitDone(t, 2*perKey)
	// Starts by the store's clock: each key's any Limit+1 consecutive
	// starts span at least Per.
	at := map[string][]time.Time{}
	for _, id := range ids {
		j := getJob(t, be, id)
		at[j.FlowKey] = append(at[j.FlowKey], *j.AttemptedAt)
	}
	for k, ts := range at {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 0; i+rate.Limit < len(ts); i++ {
			if span := ts[i+rate.Limit].Sub(ts[i]); span < rate.Per {
				t.Fatalf("key %q: %d starts within %s, over the limit of %d per %s", k, rate.Limit+1, span, rate.Limit, rate.Per)
			}
		}
	}
	// Each key has a bucket of its own, so the keys start side by side:
	// each key's first start comes before the other's last, whose 12
	// starts at the limit span at least a second by the store's clock
	// however slow the machine. Keys run one after the other would not.
	for k, ts := range at {
		for o, os := range at {
			if o != k && !ts[0].Before(os[len(os)-1]) {
				t.Fatalf("key %q first started at %s, after key %q's last start at %s: the keys did not start side by side",
					k, ts[0].Format(time.RFC3339Nano), o, os[len(os)-1].Format(time.RFC3339Nano))
			}
		}
	}
}

func testFlowOrdered(t *testing.T, h Harness, order spool.FlowOrder) {
	be := h.NewBackend(t)
	rec := newFlowRecorder(10)
	cfg := func() *spool.Config {
		c := flowConfig(rec.workers(), 4, &spool.Flow{Order: order})
		// Job 1's retry is an hour away: what of key k runs before it is
		// decided by the order alone, never by how fast the machine is. The
		// test makes the retry due itself (JobRetry) once the runs the order
		// allows before it have happened.
		c.RetryPolicy = spool.ConstantRetryPolicy{Delay: time.Hour}
		return c
	}
	c := newClient(t, be, cfg())
	// Priorities run against insert order, which must win within the key.
	var ids []int64
	for i := range 5 {
		fail := 0
		if i == 1 {
			fail = 1
		}
		res, err := c.Insert(context.Background(), flowArgs{Key: "k", N: i, Fail: fail, Sleep: 40}, &spool.InsertOpts{Queue: "flow", Priority: 10 - i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	other := insertFlow(t, c, flowArgs{Key: "other", N: 10}, flowArgs{Key: "other", N: 11})
	flowClients(t, h, be, 2, cfg)
	// Before job 1 runs again: k's job 0 and both jobs of the other key,
	// whose wait here also asserts that k's failed job does not hold them
	// up; when k's jobs step aside, its jobs 2 to 4 as well.
	before := 3
	if order == spool.FlowOrderStepAside {
		before = 6
	}
	rec.waitDone(t, before)
	waitState(t, be, ids[1], backend.StateRetryable)
	if _, err := c.JobRetry(context.Background(), ids[1]); err != nil {
		t.Fatalf("make job 1 due: %v", err)
	}
	rec.waitDone(t, 7-before)
	_, keyPeak, starts := rec.snapshot()
	if keyPeak["k"] != 1 {
		t.Fatalf("ordered key ran %d jobs at once", keyPeak["k"])
	}
	var seq []string
	var ns []int
	for _, s := range starts {
		if s.key == "k" {
			seq = append(seq, fmt.Sprintf("%d/%d", s.n, s.attempt))
			ns = append(ns, s.n)
		}
	}
	name, want := "blocking", []int{0, 1, 1, 2, 3, 4}
	if order == spool.FlowOrderStepAside {
		name, want = "step-aside", []int{0, 1, 2, 3, 4, 1}
	}
	if !slices.Equal(ns, want) || seq[0] != "0/1" || seq[1] != "1/1" {
		t.Fatalf("%s order %v (job/attempt), want jobs %v", name, seq, want)
	}
	for _, id := range append(ids, other...) {
		waitState(t, be, id, backend.StateCompleted)
	}
}

func testFlowOrderBlock(t *testing.T, h Harness) { testFlowOrdered(t, h, spool.FlowOrderBlock) }
func testFlowOrderStepAside(t *testing.T, h Harness) {
	testFlowOrdered(t, h, spool.FlowOrderStepAside)
}

// flowShare runs big and small backlogs under FairShare on be and returns
// the keys of the jobs in the order they were claimed (jobs of one claim in
// the order they started). Fair share decides the claims; the order of
// starts adds the Go scheduler's: a job handed to a goroutine that is not
// yet running can start a few milliseconds late, after dozens of jobs that
// running goroutines took from the buffer after it was claimed.
func flowShares(t *testing.T, be backend.Backend, weights map[string]int, jobs map[string]int) []string {
	total := 0
	for _, n := range jobs {
		total += n
	}
	rec := newFlowRecorder(total)
	c := newClient(t, be, flowConfig(rec.workers(), 4, &spool.Flow{FairShare: true, Weights: weights}))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range jobs {
			if !yield(k) {
				return
			}
		}
	}) {
		batch := make([]flowArgs, jobs[k])
		for i := range batch {
			batch[i] = flowArgs{Key: k, N: i}
		}
		insertFlow(t, c, batch...)
	}
	start(t, c)
	rec.waitDone(t, total)
	_, _, starts := rec.snapshot()
	slices.SortStableFunc(starts, func(a, b flowStart) int { return a.claimed.Compare(b.claimed) })
	keys := make([]string, len(starts))
	for i, s := range starts {
		keys[i] = s.key
	}
	return keys
}

// keyBeside returns, for a queue spread over stores, the first of name,
// name-1, name-2, … whose jobs are on the same store as key's: fair shares
// are kept among the keys of each store. Otherwise it returns name.
func keyBeside(t *testing.T, h Harness, be backend.Backend, key, name string) string {
	sp := h.spread()
	if sp == nil {
		return name
	}
	want := sp.KeyStore(be, key)
	for i := range 10000 {
		k := name
		if i > 0 {
			k = fmt.Sprintf("%s-%d", name, i)
		}
		if sp.KeyStore(be, k) == want {
			return k
		}
	}
	t.Fatalf("no key %s-N is on the store of %q", name, key)
	return ""
}

func testFlowFairShare(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	small := keyBeside(t, h, be, "big", "small")
	// 3:1 while both have work: the first 200 jobs claimed.
	keys := flowShares(t, be, map[string]int{"big": 3}, map[string]int{"big": 300, small: 300})
	n := 0
	for _, k := range keys[:200] {
		if k == "big" {
			n++
		}
	}
	if share := float64(n) / 200; share < 0.70 || share > 0.80 {
		t.Fatalf("key with weight 3 got %.2f of the first claimed jobs against weight 1, want 0.75", share)
	}
}

func testFlowFairSmallNotStarved(t *testing.T, h Harness) {
	// The big key's backlog was inserted first; the small key's ten jobs
	// must not wait behind it: 1:1 puts every other start to the small key.
	be := h.NewBackend(t)
	small := keyBeside(t, h, be, "a-big", "b-small")
	keys := flowShares(t, be, nil, map[string]int{"a-big": 1000, small: 10})
	last := slices.Index(keys, small)
	for i, k := range keys {
		if k == small {
			last = i
		}
	}
	if last > 40 {
		t.Fatalf("the small key's last job was claimed %d-th, behind the big backlog", last+1)
	}
}

func testFlowKeysAndInput(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ws, started, release := blockingWorkers()
	cfg := fastConfig(ws, 1)
	cfg.Queues = map[string]spool.QueueConfig{"flow": {MaxWorkers: 3, Flow: &spool.Flow{KeyLimit: 1}}}
	c := newClient(t, be, cfg)
	for i, k := range []string{"a", "a", "a", "b", "b"} {
		insert(t, c, NoteArgs{N: i, Mode: "block"}, &spool.InsertOpts{Queue: "flow", FlowKey: k})
	}
	insert(t, c, NoteArgs{N: 9, Mode: "block"}, &spool.InsertOpts{Queue: "flow"})
	// Bad keys are refused, and nothing is written.
	// The longest key is stored exactly, multi-byte characters and all.
	long := strings.Repeat("é", 127) + "z"
	id := insert(t, c, NoteArgs{N: 8}, &spool.InsertOpts{Queue: "other", FlowKey: long})
	if got := getJob(t, be, id).FlowKey; got != long {
		t.Fatalf("a 255-byte key came back as %q", got)
	}
	for _, bad := range []string{"tab\there", string([]byte{0xff}), strings.Repeat("a", 256), "nul\x00"} {
		_, err := c.Insert(context.Background(), NoteArgs{}, &spool.InsertOpts{Queue: "flow", FlowKey: bad})
		var inv *spool.InvalidJobError
		if !errors.As(err, &inv) || inv.Field != "flow_key" {
			t.Fatalf("flow key %q: %v, want an InvalidJobError on flow_key", bad, err)
		}
	}
	for _, f := range []*spool.Flow{{}, {KeyLimit: 2, Order: spool.FlowOrderBlock}, {GlobalLimit: -1},
		{Rate: &spool.RateLimit{Limit: 5, Per: time.Second, Burst: 6}}, {Weights: map[string]int{"a": 2}}} {
		bad := fastConfig(ws, 1)
		bad.Queues = map[string]spool.QueueConfig{"flow": {MaxWorkers: 1, Flow: f}}
		if _, err := spool.NewClient(be, bad); !errors.Is(err, spool.ErrInvalidConfig) {
			t.Fatalf("flow %+v: %v, want ErrInvalidConfig", f, err)
		}
	}
	start(t, c)
	// One job of each key runs, and the one without a key (one slot per
	// key, jobs without a key sharing one).
	for range 3 {
		recv(t, started, "a job of each key")
	}
	use, err := c.FlowKeys(context.Background(), "flow", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for _, u := range use {
		got[u.Key] = [2]int{u.Running, u.Pending}
	}
	want := map[string][2]int{"a": {1, 2}, "b": {1, 1}, "": {1, 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("flow use %v, want %v (running, pending by key)", got, want)
	}
	if use[0].Key != "a" {
		t.Fatalf("busiest key first: got %q first", use[0].Key)
	}
	close(release)
}

func testFlowRateStatesPruned(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	ctx := context.Background()
	params := &backend.JobClaimFlowParams{Queue: "flow", Lease: time.Minute, ClaimID: "prune#1"}
	err := be.JobClaimFlow(ctx, params, func(tx backend.FlowTx) error {
		run, err := tx.FlowRunning(ctx)
		if err != nil {
			return err
		}
		return tx.FlowSaveRates(ctx, map[string]time.Time{
			"stale": run.Now.Add(-2 * time.Hour), "recent": run.Now.Add(-time.Minute), "ahead": run.Now.Add(time.Minute)})
	})
	if err != nil {
		t.Fatalf("save rate states: %v", err)
	}
	if _, err := be.JobCleanup(ctx, &backend.JobCleanupParams{CompletedAge: time.Hour}); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	var left map[string]time.Time
	err = be.JobClaimFlow(ctx, params, func(tx backend.FlowTx) (err error) {
		left, err = tx.FlowRates(ctx, []string{"stale", "recent", "ahead"})
		return err
	})
	if err != nil {
		t.Fatalf("read rate states: %v", err)
	}
	if _, ok := left["stale"]; ok || len(left) != 2 {
		t.Fatalf("rate states after cleanup %v: want the one that passed two hours ago gone, the other two kept", left)
	}
}
