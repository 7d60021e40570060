package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

func testFencing(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	id := insert(t, c, NoteArgs{}, nil)
	claim := func(lease time.Duration) *backend.JobRow {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: lease, ClaimID: "t"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %v", rowIDs(rows), err)
		}
		return rows[0]
	}
	first := claim(time.Millisecond)
	// The lease ends by the database clock; rescue returns the job.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := be.JobRescue(ctx, &backend.JobRescueParams{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retried == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(2 * time.Millisecond)
	}
	second := claim(time.Minute)
	if second.ID != id || second.Fence != first.Fence+1 || second.Attempt != 2 {
		t.Fatalf("second claim: %+v", second)
	}
	// The first holder's late writes are all rejected, and change nothing.
	for _, o := range []backend.Outcome{backend.OutcomeComplete, backend.OutcomeRetry, backend.OutcomeCancel, backend.OutcomeRelease} {
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: first.Lease(), Outcome: o}}})
		if err != nil || len(res.Rejected) != 1 || res.Rejected[0] != first.Lease() {
			t.Fatalf("stale outcome %d: %+v %v", o, res, err)
		}
	}
	hb, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: []backend.LeaseRef{first.Lease(), second.Lease()}, Lease: time.Minute})
	if err != nil || len(hb.Lost) != 1 || hb.Lost[0] != first.Lease() {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if j := getJob(t, be, id); j.State != backend.StateRunning || j.Fence != second.Fence {
		t.Fatalf("job changed by a stale lease: %+v", j)
	}
	// A mixed batch applies the live lease and rejects only the stale one.
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{
		{Lease: first.Lease(), Outcome: backend.OutcomeComplete},
		{Lease: second.Lease(), Outcome: backend.OutcomeComplete},
	}})
	if err != nil || len(res.Rejected) != 1 || res.Rejected[0] != first.Lease() {
		t.Fatalf("mixed batch: %+v %v", res, err)
	}
	if j := getJob(t, be, id); j.State != backend.StateCompleted {
		t.Fatalf("state %s after completion", j.State)
	}
	// A completed job never runs again.
	if rows, _ := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: 1, Lease: time.Minute, ClaimID: "t"}); len(rows) != 0 {
		t.Fatalf("completed job claimed again: %v", rowIDs(rows))
	}
}

// testReleaseLostClaim: the jobs of a claim whose caller never got the reply
// go back by claim id, attempt given back; other claims are untouched, and
// the lost claim's fence stays void.
// testHeartbeatNeverShortens: a beat asking for a shorter lease than the
// job holds leaves it as it is, and reports the lease held. A client may
// have two beats out at once, and the one sent first (with the earlier
// "now") may land last; it must not cut short what the later one gave.
func testHeartbeatNeverShortens(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		insert(t, c, NoteArgs{N: i}, nil)
	}
	var held []*backend.JobRow
	for _, n := range []int{1, 2} { // a claim of one job, and of several (some stores keep those apart)
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: n, Lease: time.Minute, ClaimID: fmt.Sprintf("c#%d", n)})
		if err != nil || len(rows) != n {
			t.Fatalf("claim %d: %v %v", n, rowIDs(rows), err)
		}
		held = append(held, rows...)
	}
	leases := make([]backend.LeaseRef, len(held))
	for i, r := range held {
		leases[i] = r.Lease()
	}
	beat := func(d time.Duration) {
		t.Helper()
		res, err := be.JobHeartbeatMany(ctx, &backend.JobHeartbeatManyParams{Leases: leases, Lease: d})
		if err != nil || len(res.Lost) != 0 || res.Incomplete() != nil {
			t.Fatalf("heartbeat of %s: %+v %v", d, res, err)
		}
	}
	until := func() map[int64]time.Time {
		out := map[int64]time.Time{}
		for _, r := range held {
			j := getJob(t, be, r.ID)
			if j.LeasedUntil == nil || j.State != backend.StateRunning {
				t.Fatalf("job %d after a heartbeat: %+v", r.ID, j)
			}
			out[r.ID] = *j.LeasedUntil
		}
		return out
	}
	beat(time.Hour)
	long := until()
	for id, u := range long {
		if time.Until(u) < 50*time.Minute {
			t.Fatalf("job %d: a one-hour beat leased it until %s", id, u)
		}
	}
	beat(time.Second)
	for id, u := range until() {
		if u.Before(long[id]) {
			t.Fatalf("job %d: a shorter beat moved its lease back from %s to %s", id, long[id], u)
		}
	}
	beat(2 * time.Hour)
	for id, u := range until() {
		if !u.After(long[id].Add(30 * time.Minute)) {
			t.Fatalf("job %d: a longer beat left its lease at %s (was %s)", id, u, long[id])
		}
	}
}

func testReleaseLostClaim(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger(t)})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		insert(t, c, NoteArgs{N: i}, nil)
	}
	claim := func(id string, n int) []*backend.JobRow {
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: spool.DefaultQueue, Max: n, Lease: time.Minute, ClaimID: id})
		if err != nil || len(rows) != n {
			t.Fatalf("claim %s: %d rows, %v", id, len(rows), err)
		}
		return rows
	}
	lost := claim("c#1", 3)
	kept := claim("c#2", 2)
	n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "c#1"})
	if err != nil || n != 3 {
		t.Fatalf("release: %d %v", n, err)
	}
	for _, r := range lost {
		j := getJob(t, be, r.ID)
		if j.State != backend.StateAvailable || j.Attempt != 0 || j.LeasedUntil != nil || j.LeasedBy != "" {
			t.Fatalf("released job: %+v", j)
		}
	}
	for _, r := range kept {
		if j := getJob(t, be, r.ID); j.State != backend.StateRunning || j.LeasedBy != "c#2" {
			t.Fatalf("job of another claim touched: %+v", j)
		}
	}
	again := claim("c#3", 3)
	if again[0].Fence != lost[0].Fence+1 || again[0].Attempt != 1 {
		t.Fatalf("reclaimed: fence %d (lost %d) attempt %d", again[0].Fence, lost[0].Fence, again[0].Attempt)
	}
	res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: []backend.JobFinish{{Lease: lost[0].Lease(), Outcome: backend.OutcomeComplete}}})
	if err != nil || len(res.Rejected) != 1 {
		t.Fatalf("the lost claim's lease still writes: %+v %v", res, err)
	}
	if n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: "c#1"}); err != nil || n != 0 {
		t.Fatalf("second release: %d %v", n, err)
	}
}

func testHeartbeatKeepsLongJob(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	cfg := fastConfig(ws, 1)
	// A heartbeat is sent every third of the lease and must land within
	// two thirds of it. A 1-s lease left 667 ms, which a beat exceeded
	// once on a 2-core machine running every module's tests and a chaos
	// run; a 2-s lease left 1.33 s, which a MariaDB beat exceeded (1.435 s)
	// at load 16 in a CI run with PostgreSQL's package in two processes
	// beside it: the machine, not the heartbeat, lost the lease. With 3 s
	// a beat may take 2 s, and the run still spans two lease lengths
	// (six beats), as long as three 2-s ones did.
	cfg.LeaseDuration = 3 * time.Second
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	// Run past several lease lengths while the leader rescues every 50ms:
	// heartbeats must keep the lease.
	first := getJob(t, be, id).LeasedUntil
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := getJob(t, be, id)
		if j.State != backend.StateRunning {
			t.Fatalf("long job left running: %+v", j)
		}
		if j.LeasedUntil.Sub(*first) > 2*cfg.LeaseDuration {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease not extended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	j := waitState(t, be, id, backend.StateCompleted)
	if runs.Load() != 1 || j.Attempt != 1 {
		t.Fatalf("runs %d attempt %d", runs.Load(), j.Attempt)
	}
}

func testLostLeaseCancelsJob(t *testing.T, h Harness) {
	lostLeaseCancelsJobOn(t, h.NewBackend(t), 2*time.Second)
}

// slowGets is a backend whose job reads take delay longer than the
// store's, as on a loaded database, unless their context ends first.
type slowGets struct {
	backend.Backend
	delay time.Duration
}

func (b *slowGets) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return nil, fmt.Errorf("get job %d: %w", id, context.Cause(ctx))
	}
	return b.Backend.JobGet(ctx, id)
}

// testLostLeaseSlowRead: the read that tells why a lease was lost takes
// longer than the time between heartbeats (a third of the lease) but less
// than the lease: the handler is cancelled at once, and the log line still
// names the cause, a little later.
func testLostLeaseSlowRead(t *testing.T, h Harness) {
	const lease = 3 * time.Second
	lostLeaseCancelsJobOn(t, &slowGets{Backend: h.NewBackend(t), delay: lease / 2}, lease)
}

// lostLeaseCancelsJobOn runs one job on a client of be with the given
// lease and cancels it while it runs: the handler's context ends with
// ErrLeaseLost, a line names the job and the user's cancellation, and
// the handler's late success does not overwrite the cancellation.
func lostLeaseCancelsJobOn(t *testing.T, be backend.Backend, lease time.Duration) {
	causes := make(chan error, 1)
	started := make(chan int64, 1)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		started <- j.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // returns "success" late: must be fenced out
	}))
	cfg := fastConfig(ws, 1)
	// Long enough that a loaded machine's slow heartbeats do not lose the
	// lease to rescue before the user's cancel does (HeartbeatKeepsLongJob).
	cfg.LeaseDuration = lease
	warned := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "cancelled by a user", seen: warned})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	recv(t, started, "start")
	// A user cancels the running job: the worker's lease is gone, and the
	// warning says so.
	if _, err := c.JobCancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, causes, "cancellation"); !errors.Is(cause, spool.ErrLeaseLost) {
		t.Fatalf("cause = %v", cause)
	}
	// The line is read from the job's row as it is now (the cancelled
	// state), so naming the user's cancellation says the read was made.
	if w := recv(t, warned, "a line that names the job and the user's cancellation"); !strings.Contains(w, fmt.Sprintf("job_ids=[%d]", id)) {
		t.Fatalf("line %q does not name the job cancelled by a user", w)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j := getJob(t, be, id); j.State != backend.StateCancelled {
		t.Fatalf("the late success overwrote the cancellation: %s", j.State)
	}
}

// testCompleteTxHeartbeatQuiet: a heartbeat that comes after the handler's
// CompleteTx committed, while the handler still runs, finds the lease ended
// by that commit. That is the ordinary path: the handler is not cancelled
// and nothing warns about a lost lease.
func testCompleteTxHeartbeatQuiet(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	completeTxRunOn(t, h, be, be, nil, nil)
}

// failingGets is a backend whose next job reads fail as a read that outlasts
// its deadline on a loaded machine does.
type failingGets struct {
	backend.Backend
	fail atomic.Int32 // reads left to fail; below zero once one has
}

func (b *failingGets) JobGet(ctx context.Context, id int64) (*backend.JobRow, error) {
	if b.fail.Add(-1) >= 0 {
		return nil, fmt.Errorf("get job %d: %w", id, context.DeadlineExceeded)
	}
	return b.Backend.JobGet(ctx, id)
}

// testCompleteTxLookupFails: after the handler's CompleteTx committed, the
// heartbeat finds the lease ended and reads the job to tell why, and that
// read fails. Not knowing is no reason to cancel: the commit is the usual
// cause, and the next beat looks again. The handler runs on, and nothing
// warns.
func testCompleteTxLookupFails(t *testing.T, h Harness) {
	inner := h.NewBackend(t)
	be := &failingGets{Backend: inner}
	completeTxRunOn(t, h, be, inner, func() { be.fail.Store(1) }, func() bool { return be.fail.Load() < 0 })
}

// completeTxRunOn runs one job on a client of be whose handler completes it
// with CompleteTx in a transaction of inner, calls committed (when not nil)
// after the commit, and runs on past three heartbeats and, when reached is
// not nil, until it reports true and two heartbeats more: none may cancel
// it, and nothing may warn of a lost lease.
func completeTxRunOn(t *testing.T, h Harness, be, inner backend.Backend, committed func(), reached func() bool) {
	t.Helper()
	results := make(chan error, 1)
	ws := spool.NewWorkers()
	cfg := fastConfig(ws, 1)
	// A lease that ends by the run's own clock before a beat lands cancels
	// the handler, committed or not (the client cannot tell), which is not
	// this test's subject: beats have two thirds of the lease to land. A
	// loaded 2-core machine took longer than the 200 ms a 300-ms lease
	// left, and a process paused for 3.5 s lost a 2-s lease; a 6-s lease
	// outlasts a pause of 4 s and still beats every 2 s.
	cfg.LeaseDuration = 6 * time.Second
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		tx := h.BeginTx(t, inner)
		if err := spool.CompleteTx(ctx, btx(tx), j); err != nil {
			_ = tx.Rollback(ctx)
			results <- err
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			results <- err
			return err
		}
		if committed != nil {
			committed()
		}
		// Stay past three heartbeats (one every third of the lease): none
		// may cancel us.
		runOn := time.After(cfg.LeaseDuration + 100*time.Millisecond)
		giveUp := time.After(3 * cfg.LeaseDuration)
		poll := time.NewTicker(10 * time.Millisecond)
		defer poll.Stop()
		for {
			select {
			case <-ctx.Done():
				results <- fmt.Errorf("handler cancelled after its CompleteTx committed: %w", context.Cause(ctx))
				return nil
			case <-runOn:
				if reached == nil {
					results <- nil
					return nil
				}
				runOn = nil
			case <-poll.C:
				if runOn == nil && reached() {
					runOn, reached = time.After(2*cfg.LeaseDuration/3), nil
				}
			case <-giveUp:
				results <- fmt.Errorf("the awaited heartbeat did not come within %s", 3*cfg.LeaseDuration)
				return nil
			}
		}
	}))
	warned := make(chan string, 1)
	cfg.Logger = slog.New(&logWatch{msg: "no longer held", seen: warned})
	c := newClient(t, be, cfg)
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	if err := recv(t, results, "handler"); err != nil {
		t.Fatal(err)
	}
	waitState(t, inner, id, backend.StateCompleted)
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-warned:
		t.Fatalf("warned on the CompleteTx path: %s", w)
	default:
	}
}

func testCompleteTx(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	txs := make(chan Tx, 1)
	results := make(chan error, 2)
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(ctx context.Context, j *spool.Job[NoteArgs]) error {
		tx := h.BeginTx(t, be)
		err := spool.CompleteTx(ctx, btx(tx), j)
		results <- err
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if j.Args.Mode == "rollback" {
			_ = tx.Rollback(ctx)
			return errors.New("rolled back")
		}
		txs <- tx
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return errors.New("this error must be ignored: the job completed in its transaction")
	}))
	c := newClient(t, be, fastConfig(ws, 1))
	start(t, c)
	id := insert(t, c, NoteArgs{}, nil)
	if err := recv(t, results, "complete tx"); err != nil {
		t.Fatal(err)
	}
	recv(t, txs, "commit")
	j := waitState(t, be, id, backend.StateCompleted)
	if j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("completed in tx: %+v", j)
	}
	// Rolled back: the completion goes with it and the job retries.
	id = insert(t, c, NoteArgs{Mode: "rollback"}, &spool.InsertOpts{MaxAttempts: 1})
	if err := recv(t, results, "complete tx"); err != nil {
		t.Fatal(err)
	}
	if j := waitState(t, be, id, backend.StateDiscarded); len(j.Errors) != 1 || j.Errors[0].Error != "rolled back" {
		t.Fatalf("rolled back completion: %+v", j)
	}
	// Outside a job context it is an error, not a panic.
	outside := h.BeginTx(t, be)
	defer func() { _ = outside.Rollback(context.Background()) }()
	if err := spool.CompleteTx(context.Background(), btx(outside), &spool.Job[NoteArgs]{JobRow: j}); err == nil {
		t.Fatal("CompleteTx outside a job succeeded")
	}
}
