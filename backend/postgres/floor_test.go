package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/backend"
)

func key(prio int16, sec int64, id int64) claimKey {
	return claimKey{priority: prio, runAt: time.Unix(sec, 0).UTC(), id: id}
}

// keyPtr is key's value by pointer, as end and probed take the last key.
func keyPtr(prio int16, sec int64, id int64) *claimKey {
	k := key(prio, sec, id)
	return &k
}

func listeningFloors() *claimFloors {
	f := &claimFloors{probeEvery: time.Hour}
	f.listen(+1)
	return f
}

func TestFloorRisesWithClaims(t *testing.T) {
	f := listeningFloors()
	now := time.Now()
	t1 := f.begin("q", now)
	if !t1.full || t1.bound != headKey {
		t.Fatalf("first claim: %+v, want a full claim from the head", t1)
	}
	f.end(t1, keyPtr(0, 10, 5), now)
	t2 := f.begin("q", now)
	if t2.full || t2.bound != key(0, 10, 5) {
		t.Fatalf("second claim: %+v, want one above (0, 10, 5)", t2)
	}
	f.end(t2, nil, now) // found nothing: the floor stays
	f.end(f.begin("q", now), keyPtr(1, 2, 3), now)
	if b := f.begin("q", now).bound; b != key(1, 2, 3) {
		t.Fatalf("floor %+v, want (1, 2, 3)", b)
	}
	if b := f.begin("other", now); !b.full {
		t.Fatalf("another queue's first claim: %+v, want full", b)
	}
}

func TestFloorLowerBelowAndDuringClaims(t *testing.T) {
	f := listeningFloors()
	now := time.Now()
	f.end(f.begin("q", now), keyPtr(0, 10, 5), now)

	// Reported while no claim runs: the floor drops just below the key.
	f.lower("q", key(0, 3, 2))
	if b := f.begin("q", now).bound; b != key(0, 3, 1) {
		t.Fatalf("floor %+v, want just below (0, 3, 2)", b)
	}
	// A key above the floor changes nothing.
	f.lower("q", key(0, 50, 9))
	tk := f.begin("q", now)
	if tk.bound != key(0, 3, 1) {
		t.Fatalf("floor %+v after a key above it", tk.bound)
	}
	// Reported while a claim runs that did not see it: the claim's result
	// must not raise the floor past it.
	f.lower("q", key(0, 20, 7))
	f.end(tk, keyPtr(0, 30, 8), now)
	if b := f.begin("q", now).bound; b != key(0, 20, 6) {
		t.Fatalf("floor %+v, want just below the key reported during the claim", b)
	}
}

func TestFloorResetAndListening(t *testing.T) {
	f := listeningFloors()
	now := time.Now()
	f.end(f.begin("q", now), keyPtr(0, 10, 5), now)
	tk := f.begin("q", now)
	f.reset("q")
	f.end(tk, keyPtr(0, 20, 6), now) // began before the reset: sets nothing
	if b := f.begin("q", now); !b.full {
		t.Fatalf("after reset: %+v, want a full claim", b)
	}
	f.end(f.begin("q", now), keyPtr(0, 10, 5), now)
	f.listen(-1)
	if b := f.begin("q", now); !b.full {
		t.Fatalf("not listening: %+v, want a full claim", b)
	}
	f.listen(+1)
	if b := f.begin("q", now); !b.full {
		t.Fatalf("listening again: %+v, want a full claim first", b)
	}
}

// A claim may start at the shared floor only below every key reported
// since a claim last went past it (the cap), and a full claim from the head
// never uses the shared floor.
func TestFloorCapBoundsSharedStart(t *testing.T) {
	f := listeningFloors()
	now := time.Now()
	first := f.begin("q", now)
	if first.shared {
		t.Fatalf("a claim from the head may start at the shared floor: %+v", first)
	}
	f.end(first, keyPtr(0, 10, 5), now)
	tk := f.begin("q", now)
	if !tk.shared || tk.cap != nil {
		t.Fatalf("claim with a floor of its own: %+v, want shared and no cap", tk)
	}
	f.end(tk, keyPtr(0, 12, 6), now)

	// A key above the process's own floor leaves that floor, but caps the
	// start: the shared floor may be above it.
	f.lower("q", key(0, 20, 7))
	tk = f.begin("q", now)
	if tk.bound != key(0, 12, 6) || tk.cap == nil || *tk.cap != key(0, 20, 6) {
		t.Fatalf("after a report above the floor: %+v, want bound (0, 12, 6), cap just below (0, 20, 7)", tk)
	}
	// A claim that stopped short of the cap leaves it.
	f.end(tk, keyPtr(0, 15, 1), now)
	tk = f.begin("q", now)
	if tk.cap == nil {
		t.Fatal("a claim that ended below the cap cleared it")
	}
	// One that went past it, with no report since it began, clears it.
	f.end(tk, keyPtr(0, 30, 1), now)
	tk = f.begin("q", now)
	if tk.cap != nil {
		t.Fatalf("cap %+v after a claim went past it", *tk.cap)
	}
	// A report while a claim runs outlives that claim, wherever it ends.
	f.lower("q", key(0, 40, 3))
	f.end(tk, keyPtr(0, 50, 1), now)
	if tk = f.begin("q", now); tk.cap == nil || *tk.cap != key(0, 40, 2) {
		t.Fatalf("after a report during a claim: %+v, want cap just below (0, 40, 3)", tk)
	}
	f.end(tk, nil, now)
}

func TestFloorProbesRecur(t *testing.T) {
	f := &claimFloors{}
	f.listen(+1)
	now := time.Now()
	f.end(f.begin("q", now), keyPtr(0, 10, 5), now)
	if tk := f.begin("q", now.Add(500*time.Millisecond)); tk.probe || tk.full {
		t.Fatalf("%+v: want a floor claim and no probe within a second of the full claim", tk)
	}
	tk := f.begin("q", now.Add(time.Second))
	if !tk.probe || tk.full || tk.bound != key(0, 10, 5) {
		t.Fatalf("%+v: want a floor claim and a probe below it a second later", tk)
	}
	if tk := f.begin("q", now.Add(2*time.Second)); tk.probe {
		t.Fatal("a second probe while one runs")
	}
	// A slow probe (100 ms) spaces the next 50× its duration apart.
	f.probed("q", keyPtr(0, 3, 2), 100*time.Millisecond, now.Add(2*time.Second))
	if b := f.begin("q", now.Add(6*time.Second)); b.probe || b.bound != key(0, 3, 1) {
		t.Fatalf("%+v: want the floor lowered below the probe's key and no probe before 5 s", b)
	}
	if b := f.begin("q", now.Add(8*time.Second)); !b.probe {
		t.Fatal("no probe 5 s after the last")
	}
}

func TestParseInsertNotice(t *testing.T) {
	q, k, ok := parseInsertNotice("mail 3 1700000000000001")
	if !ok || q != "mail" || k.priority != 3 || k.id != 0 || k.runAt.UnixMicro() != 1700000000000000 {
		t.Fatalf("got %q %+v %v", q, k, ok)
	}
	for _, p := range []string{"mail", "mail 3 x", "mail 3 1 2 5", ""} {
		if _, _, ok := parseInsertNotice(p); ok {
			t.Errorf("%q parsed as a key", p)
		}
	}
	// This backend's own inserts list their jobs' ids after the key.
	if q, k, ok := parseInsertNotice("mail 3 1700000000000001 41,42"); !ok || q != "mail" || k.priority != 3 {
		t.Errorf("a notice listing its jobs parsed as %q %+v %v", q, k, ok)
	}
	for p, want := range map[string][]int64{
		"mail 3 1 41,42": {41, 42}, "mail 3 1 7": {7}, "mail 3 1": nil, "mail 3 1 x": nil,
		"mail 3 1 4,": nil, "mail 3 1 0": nil, "mail 3 1 -4": nil, "mail 3 1 4 5": nil,
	} {
		if got := noticeIDs(p); !slices.Equal(got, want) {
			t.Errorf("noticeIDs(%q) = %v, want %v", p, got, want)
		}
	}
	if q, _, _ := parseInsertNotice("mail"); q != "mail" {
		t.Errorf("bare queue read as %q", q)
	}
}

// floorTest is a backend with its notification listener running and probes
// an hour apart, so that only a lowered floor can bring a straggler back.
type floorTest struct {
	t     *testing.T
	b     *Backend
	wakes chan backend.Wake
	n     atomic.Int64
}

func newFloorTest(t *testing.T) *floorTest {
	t.Helper()
	b, _ := scratchBackend(t)
	b.floors.probeEvery = time.Hour
	b.noRelay = true // each insert notifies, with its key
	ft := &floorTest{t: t, b: b, wakes: make(chan backend.Wake, 1000)}
	listening(t, context.Background(), b, func(w backend.Wake) { ft.wakes <- w })
	return ft
}

// insert inserts a job in db (the pool or a transaction) with priority prio
// and returns its id.
func (ft *floorTest) insert(db DBTX, prio int) int64 {
	ft.t.Helper()
	var id int64
	err := db.QueryRow(context.Background(), fmt.Sprintf(
		`INSERT INTO %s.spool_jobs (kind, priority) VALUES ('noop', $1) RETURNING id`, ft.b.schema), prio).Scan(&id)
	if err != nil {
		ft.t.Fatal(err)
	}
	return id
}

// awaitWakes waits until n insert notifications in all have been handled.
func (ft *floorTest) awaitWakes(n int64) {
	ft.t.Helper()
	for ft.n.Load() < n {
		select {
		case <-ft.wakes:
			ft.n.Add(1)
		case <-time.After(10 * time.Second):
			ft.t.Fatalf("%d of %d notifications arrived", ft.n.Load(), n)
		}
	}
}

func (ft *floorTest) claim(max int) []int64 {
	ft.t.Helper()
	jobs, err := ft.b.JobClaim(context.Background(), &backend.JobClaimParams{Queue: "default", Max: max, Lease: time.Minute, ClaimID: "t#1"})
	if err != nil {
		ft.t.Fatal(err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: claimed %v, want %v", what, got, want)
	}
}

// A job whose transaction began before jobs that claims have since taken
// sorts below the floor; its insert notification must bring the floor back.
func TestFloorSeesLateCommit(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	a := ft.insert(ft.b.pool, 0)
	tx, err := ft.b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	late := ft.insert(tx, 0) // run_at: this transaction's start
	b, c := ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0)
	ft.awaitWakes(3)
	wantIDs(t, "first claim", ft.claim(10), a, b, c)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ft.awaitWakes(4)
	wantIDs(t, "claim after the late commit", ft.claim(10), late)
}

// A higher-priority job inserted after claims moved on to a lower priority.
func TestFloorSeesHigherPriority(t *testing.T) {
	ft := newFloorTest(t)
	low := []int64{ft.insert(ft.b.pool, 5), ft.insert(ft.b.pool, 5), ft.insert(ft.b.pool, 5)}
	wantIDs(t, "first claim", ft.claim(2), low[0], low[1])
	high := ft.insert(ft.b.pool, 0)
	ft.awaitWakes(4)
	wantIDs(t, "next claim", ft.claim(1), high)
	wantIDs(t, "last claim", ft.claim(1), low[2])
}

// A released job keeps its key, the floor's own: the finish must lower it.
func TestFloorSeesReleasedJob(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	first, second := ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0)
	jobs, err := ft.b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 1, Lease: time.Minute, ClaimID: "t#1"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != first {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	res, err := ft.b.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
		{Lease: backend.LeaseRef{ID: first, Fence: jobs[0].Fence}, Outcome: backend.OutcomeRelease}}})
	if err != nil || len(res.Rejected) != 0 {
		t.Fatalf("release: %v %v", res, err)
	}
	wantIDs(t, "claim after the release", ft.claim(10), first, second)
}

// While a snapshot pins the horizon, claims above the floor do not walk the
// dead entries of the jobs claimed before: measured in buffers read by the
// claim's plan, not in time.
func TestFloorSkipsDeadEntries(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	pool := ft.b.pool
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.spool_jobs (kind) SELECT 'noop' FROM generate_series(1, 20000)`, ft.b.schema)); err != nil {
		t.Fatal(err)
	}
	ft.awaitWakes(1)
	ft.holdSnapshot()
	for range 19 {
		if got := ft.claim(1000); len(got) != 1000 {
			t.Fatalf("claimed %d", len(got))
		}
	}
	// Each EXPLAIN ANALYZE claims one job, rolled back after.
	floor := ft.b.floors.begin("default", time.Now())
	ft.b.floors.end(floor, nil, time.Now())
	if floor.full {
		t.Fatal("no floor after 19 claims")
	}
	above, head := ft.claimBuffers(floor.bound, false), ft.claimBuffers(headKey, false)
	t.Logf("claim of one job behind 19,000 dead entries: %.0f buffers above the floor, %.0f from the head", above, head)
	if above > 50 || head < 10*above {
		t.Fatalf("from the head %.0f buffers, above the floor %.0f: want the floor to skip the dead entries", head, above)
	}
}

// A row another session locked while our claim passed it, then left pending
// (its claim rolled back), sends no notification: the probe finds it.
func TestFloorProbeFindsStraggler(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	a, b := ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0)
	c := ft.insert(ft.b.pool, 0)
	ft.awaitWakes(3)
	wantIDs(t, "first claim", ft.claim(1), a)
	other, err := ft.b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, fmt.Sprintf(`SELECT id FROM %s.spool_jobs WHERE id = $1 FOR UPDATE`, ft.b.schema), b); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "claim past the locked row", ft.claim(10), c)
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "claim above the floor", ft.claim(10))

	// Let the next claim start a probe, and wait for it to finish.
	ft.b.floors.mu.Lock()
	ft.b.floors.queues["default"].nextProbe = time.Time{}
	ft.b.floors.mu.Unlock()
	wantIDs(t, "claim that starts the probe", ft.claim(10))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ft.b.floors.mu.Lock()
		probing := ft.b.floors.queues["default"].probing
		ft.b.floors.mu.Unlock()
		if !probing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("probe still running after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	wantIDs(t, "claim after the probe", ft.claim(10), b)
}

// A scheduled job of a higher priority that became due sends no
// notification and was never passed by a claim: claims read higher
// priorities whole.
func TestFloorSeesDueHigherPriority(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	low := []int64{ft.insert(ft.b.pool, 5), ft.insert(ft.b.pool, 5), ft.insert(ft.b.pool, 5)}
	ft.awaitWakes(3)
	wantIDs(t, "first claim", ft.claim(2), low[0], low[1])
	var due int64
	// As a job scheduled for later looks once its time has come: state
	// scheduled, run_at passed (inserted so, the trigger sends nothing).
	if err := ft.b.pool.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s.spool_jobs (kind, priority, state, run_at)
		VALUES ('noop', 0, 'scheduled', now() - interval '1 second') RETURNING id`, ft.b.schema)).Scan(&due); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "next claim", ft.claim(1), due)
	wantIDs(t, "last claim", ft.claim(1), low[2])
}

// A job rescued by another process keeps its key, below this process's
// floor, and no trigger sees a rescue: the rescuer must announce it, or this
// process finds it only at its next probe (an hour away here; 1 to 10 s in
// production, which was most of a rescued job's wait behind a backlog in
// the lab's chaos experiment).
func TestFloorSeesJobRescuedElsewhere(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	other, err := New(ft.b.pool, &Options{Schema: ft.b.schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	first, second, third := ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0)
	ft.awaitWakes(3)
	// The other process claims the first job on a lease that has ended by
	// its rescue's statement; this one claims the second, its floor there.
	jobs, err := other.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 1, Lease: time.Microsecond, ClaimID: "other#1"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != first {
		t.Fatalf("other's claim: %v %v", jobs, err)
	}
	wantIDs(t, "first claim", ft.claim(1), second)
	res, err := other.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
	if err != nil || res.Retried != 1 {
		t.Fatalf("rescue: %+v %v", res, err)
	}
	ft.awaitWakes(4)
	wantIDs(t, "claim after the rescue", ft.claim(10), first, third)
}

// leasing makes b claim into lease rows under the claim lock, so that its
// claims read and write the queue's shared floor whatever their size.
func leasing(b *Backend) *Backend {
	b.leaseRows = true
	return b
}

// Two processes taking turns on a backlog: the claim of one starts where
// the other's last claim ended (the shared floor), not at its own floor
// below all the rows the other claimed, whose entries a held snapshot keeps.
func TestFloorSharedSkipsOthersClaims(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	pool := ft.b.pool
	leasing(ft.b)
	other := ft.otherProcess()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.spool_jobs (kind) SELECT 'noop' FROM generate_series(1, 20000)`, ft.b.schema)); err != nil {
		t.Fatal(err)
	}
	ft.awaitWakes(1)
	ft.holdSnapshot()
	mine := ft.claim(1000)
	var last int64
	for range 18 {
		jobs, err := other.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 1000, Lease: time.Minute, ClaimID: "o#1"})
		if err != nil || len(jobs) != 1000 {
			t.Fatalf("other process's claim: %d jobs, %v", len(jobs), err)
		}
		last = jobs[len(jobs)-1].ID
	}
	floor := ft.b.floors.begin("default", time.Now())
	ft.b.floors.end(floor, nil, time.Now())
	if floor.full || floor.bound.id != mine[len(mine)-1] {
		t.Fatalf("floor %+v, want one at the process's last job %d", floor, mine[len(mine)-1])
	}
	shared, own := ft.claimBuffers(floor.bound, true), ft.claimBuffers(floor.bound, false)
	t.Logf("claim of one job behind the other process's 18,000 claimed jobs: %.0f buffers from the shared floor, %.0f from its own", shared, own)
	if shared > 50 || own < 10*shared {
		t.Fatalf("from its own floor %.0f buffers, from the shared one %.0f: want the shared floor to skip the other's claims", own, shared)
	}
	wantIDs(t, "claim after the other process's", ft.claim(1), last+1)
}

// A job that commits after another process's claims passed its key lies
// below the shared floor: its notification caps where this process's next
// claim starts, so that claim takes it.
func TestFloorSharedSeesLateCommit(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	leasing(ft.b)
	other := ft.otherProcess()
	a := ft.insert(ft.b.pool, 0)
	ft.awaitWakes(1)
	wantIDs(t, "first claim", ft.claim(10), a)
	tx, err := ft.b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	late := ft.insert(tx, 0) // run_at: this transaction's start
	b, c := ft.insert(ft.b.pool, 0), ft.insert(ft.b.pool, 0)
	ft.awaitWakes(3)
	jobs, err := other.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 10, Lease: time.Minute, ClaimID: "o#1"})
	if err != nil || len(jobs) != 2 || jobs[0].ID != b || jobs[1].ID != c {
		t.Fatalf("other process's claim: %v, %v; want %d and %d", jobs, err, b, c)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ft.awaitWakes(4)
	wantIDs(t, "claim after the late commit", ft.claim(10), late)
}

// claimBuffers is the shared buffers claim.sql reads to claim one job
// starting at bound (at the queue's shared floor, if higher, when shared),
// from EXPLAIN ANALYZE in a transaction rolled back after, which undoes the
// claim.
func (ft *floorTest) claimBuffers(bound claimKey, shared bool) float64 {
	ft.t.Helper()
	ctx := context.Background()
	var plan []map[string]any
	tx, err := ft.b.pool.Begin(ctx)
	if err != nil {
		ft.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, claimSettings); err != nil {
		ft.t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+ft.b.sql.claim,
		"default", 1, int64(60e6), "t#2", bound.priority, bound.runAt, bound.id, shared, false, nil, nil, nil).Scan(&plan); err != nil {
		ft.t.Fatal(err)
	}
	p := plan[0]["Plan"].(map[string]any)
	return p["Shared Hit Blocks"].(float64) + p["Shared Read Blocks"].(float64)
}

// holdSnapshot holds a snapshot open until the test ends, so that the
// claimed rows' pending-index entries stay for the claims to walk.
func (ft *floorTest) holdSnapshot() {
	ft.t.Helper()
	ctx := context.Background()
	holder, err := ft.b.pool.Begin(ctx)
	if err != nil {
		ft.t.Fatal(err)
	}
	ft.t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		ft.t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT txid_current()`); err != nil {
		ft.t.Fatal(err)
	}
}

// otherProcess is a second backend on the same schema, as another worker
// process would have, claiming into lease rows under the claim lock.
func (ft *floorTest) otherProcess() *Backend {
	ft.t.Helper()
	other, err := New(ft.b.pool, &Options{Schema: ft.b.schema})
	if err != nil {
		ft.t.Fatal(err)
	}
	ft.t.Cleanup(func() { other.Close() })
	return leasing(other)
}

// TestFloorProbeRidesTheListener: while Listen listens, a probe below the
// floor runs on its connection, so that it opens no pool connection beside
// those a claim and an outcome write hold (listenSide). Here the test holds
// every connection the pool may open: through the pool, the probe would
// wait for one until its minute ran out.
func TestFloorProbeRidesTheListener(t *testing.T) {
	ft := newFloorTest(t)
	ctx := context.Background()
	a := ft.insert(ft.b.pool, 0)
	ft.awaitWakes(1)
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for int(ft.b.pool.Stat().TotalConns()) < int(ft.b.pool.Config().MaxConns) || ft.b.pool.Stat().IdleConns() > 0 {
		c, err := ft.b.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	ft.b.floors.mu.Lock()
	ft.b.floors.queue("default").probing = true
	ft.b.floors.mu.Unlock()
	ft.b.startProbe("default", claimKey{priority: 0, runAt: time.Now().Add(time.Hour), id: a + 1000})
	done := make(chan struct{})
	go func() {
		ft.b.probes.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not end within 10 s with every pool connection taken")
	}
	ft.b.floors.mu.Lock()
	probing := ft.b.floors.queues["default"].probing
	ft.b.floors.mu.Unlock()
	if probing {
		t.Fatal("the probe's end was not recorded")
	}
}
