package postgres

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spoolq/spool/backend"
)

// Inserts from SQL while a client relays them: the first notifies and
// starts the relay, which then holds spool_sql_relay; while the relay
// holds it, no insert notifies, the jobs still wake the workers, and a job
// whose transaction commits late (below the claim floor) is claimed after
// a wake-up that follows its commit; once the time lapses an insert
// notifies again.
func TestSQLRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, pool := scratchBackend(t)
	b.relayName = 77
	b.floors.probeEvery = time.Hour // only a wake-up can bring a straggler back
	s := pgx.Identifier{b.schema}.Sanitize()

	// The inserts' own notifications on the channel, as a raw subscriber
	// hears them (not the relay's).
	raw, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Release()
	if _, err := raw.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	notified := func() int {
		n := 0
		for {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			msg, err := raw.Conn().WaitForNotification(wctx)
			cancel()
			if err != nil {
				return n
			}
			if strings.HasSuffix(msg.Payload, sqlMark) && msg.Payload != relayPayload {
				n++
			}
		}
	}

	wakes := make(chan backend.Wake, 10000)
	listening(t, ctx, b, func(w backend.Wake) { wakes <- w })
	enqueue := func(db DBTX) int64 {
		t.Helper()
		var id int64
		if err := db.QueryRow(ctx, `SELECT `+s+`.enqueue('noop')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	held := func() bool {
		t.Helper()
		var ok bool
		err := pool.QueryRow(ctx, `SELECT last_value / 1024 > floor(extract(epoch FROM clock_timestamp()) * 1000000) FROM `+s+`.spool_sql_relay`).Scan(&ok)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	setRelay := func(ahead time.Duration, name int64) { t.Helper(); setRelayTime(t, pool, b.schema, ahead, name) }
	claim := func() []int64 {
		t.Helper()
		jobs, err := b.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 1000, Lease: time.Minute, ClaimID: "t#1"})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		return ids
	}
	awaitWake := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up within 10 s %s", what)
		}
	}
	quiet := func() {
		t.Helper()
		for {
			select {
			case <-wakes:
			case <-time.After(50 * time.Millisecond):
				return
			}
		}
	}

	// The first insert notifies and starts the relay, which then holds the
	// time while inserts come.
	enqueue(pool)
	for !held() {
		if ctx.Err() != nil {
			t.Fatal("the relay never held spool_sql_relay")
		}
		enqueue(pool)
	}
	if n := notified(); n == 0 {
		t.Fatal("the inserts before the relay held the time sent no notification")
	}
	quiet()
	claim()

	// The time held for a minute under this client's relay's name (so that
	// it cannot lapse while the test runs): no insert from SQL notifies,
	// and the relay, which finds that out at its next check at the latest,
	// wakes the workers instead.
	setRelay(time.Minute, b.relayName)
	first := enqueue(pool)
	awaitWake("for a job inserted while another client's relay holds the time")
	if got := claim(); len(got) != 1 || got[0] != first {
		t.Fatalf("claimed %v after the wake-up, want [%d]", got, first)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	late := enqueue(tx) // run_at: this transaction's start, below the jobs inserted next
	const burst = 50
	for range burst {
		enqueue(pool)
	}
	quiet() // the relay has announced the burst: no wake-up for it comes after the next claim
	got := claim()
	if len(got) != burst {
		t.Fatalf("claimed %d jobs of the %d committed: %v", len(got), burst, got)
	}
	for _, id := range got {
		if id == late {
			t.Fatalf("the claim took job %d, whose transaction is still open", late)
		}
	}
	// The floor's resets so far (its generation). A wake-up still queued
	// may be the relay's for the burst, late on a loaded machine (quiet
	// waits only for 50 ms without one): its reset came before the claim
	// above began, so it does not bring the late job back, and a claim
	// right after it finds nothing.
	resets := func() uint64 {
		b.floors.mu.Lock()
		defer b.floors.mu.Unlock()
		return b.floors.queue("default").gen
	}
	claimed := resets()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Claims start above the floor the last claim left; only the relay's
	// wake-up once the late transaction has ended brings its job back: the
	// first wake-up by which the floor has been reset since that claim.
	for awaitWake("after the late commit"); resets() == claimed; {
		awaitWake("after the late commit, resetting the floor")
	}
	if got := claim(); len(got) != 1 || got[0] != late {
		t.Fatalf("claimed %v after the late commit, want [%d]", got, late)
	}
	if n := notified(); n != 0 {
		t.Fatalf("%d inserts from SQL while the relay held the time sent %d notifications, want none", burst+2, n)
	}

	// The time lapses (the relay renews it only within 5 ms of an insert):
	// the next insert notifies.
	time.Sleep(50 * time.Millisecond)
	setRelay(-time.Minute, b.relayName)
	enqueue(pool)
	if n := notified(); n != 1 {
		t.Fatalf("an insert after the relay time lapsed sent %d notifications, want 1", n)
	}
}

// Two clients listening on one schema while the time names one's relay
// (held for a minute, so that it cannot lapse during the test): the other
// client's relay stops at its first poll that finds the name and polls
// only once a second after, and both clients hear the relay's wake-ups.
func TestSQLRelayOneForAll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b, pool := twoRelayClients(t)
	s := pgx.Identifier{a.schema}.Sanitize()
	setRelayTime(t, pool, a.schema, time.Minute, a.relayName)
	wakes := listenForRelays(t, ctx, a, b)
	began := time.Now()
	start := [2]int64{a.relayPolls.Load(), b.relayPolls.Load()}
	const burst = 300
	for range burst {
		if _, err := pool.Exec(ctx, `SELECT `+s+`.enqueue('noop')`); err != nil {
			t.Fatal(err)
		}
	}
	for i, wake := range wakes {
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("client %d heard no relay wake-up", i)
		}
	}
	polls := [2]int64{a.relayPolls.Load() - start[0], b.relayPolls.Load() - start[1]}
	if limit := 2 + 2*int64(time.Since(began)/sqlIdleCheck+1); polls[1] > limit {
		t.Errorf("the client whose relay does not hold the time polled %d times in %s (the holder %d): want at most %d",
			polls[1], time.Since(began).Round(time.Millisecond), polls[0], limit)
	}
	if polls[0] == 0 {
		t.Error("the relay holding the time never polled")
	}
}

// A relay polls every sqlPollEvery while its client has a worker waiting
// for a wake-up, else every sqlPollSlow, and says which in the name it
// writes on the time.
func TestSQLRelayPollsByDemand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, pool := scratchBackend(t)
	b.relayName = 33
	s := pgx.Identifier{b.schema}.Sanitize()
	var waiting atomic.Bool
	remove := b.AddWakeDemand(waiting.Load)
	defer remove()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rl := newRelay(b)
	if err := rl.check(ctx, conn.Conn(), nil); err != nil {
		t.Fatal(err)
	}
	for _, fast := range []bool{false, true, false} {
		waiting.Store(fast)
		// The time has passed: the active relay writes it under its name.
		if _, err := pool.Exec(ctx, `SELECT setval('`+s+`.spool_sql_relay', 0)`); err != nil {
			t.Fatal(err)
		}
		rl.start(time.Now())
		// The renewal's quiet window counts from the last insert seen:
		// a check that a loaded machine delays past it (5 ms in the fast
		// mode) renews nothing, which is not what this test is about.
		rl.moved = time.Now().Add(time.Minute)
		before := time.Now()
		if err := rl.check(ctx, conn.Conn(), nil); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		var name int64
		if err := pool.QueryRow(ctx, `SELECT last_value % 1024 FROM `+s+`.spool_sql_relay`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		want, wantName := sqlPollSlow, b.relayName+slowName
		if fast {
			want, wantName = sqlPollEvery, b.relayName
		}
		if !rl.active || rl.next.Before(before.Add(want)) || rl.next.After(after.Add(want)) {
			t.Errorf("worker waiting %v: active %v, next poll %s after the poll, want %s", fast, rl.active, rl.next.Sub(before), want)
		}
		if name != wantName {
			t.Errorf("worker waiting %v: the time names %d, want %d", fast, name, wantName)
		}
	}
}

// A relay whose client has a worker waiting takes the time from one that
// polls slowly (its client has none), at the first of the other's
// notifications it hears once it has a worker waiting; the slow one stops
// at its next poll, and the fast one wakes both clients from then on.
func TestSQLRelayTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b, pool := twoRelayClients(t)
	// b keeps the time once it has it, however long its poll loop stalls
	// on a loaded machine: with the 50 ms lease, a stall of b's loop (or a
	// gap of more than sqlQuiet between the test's inserts) lets the time
	// lapse, and a, finding inserts counted that nobody relayed, rightly
	// relays them until b takes the time back; what is checked here is
	// that a stops once b holds it.
	b.relayLease, b.relayQuiet = time.Minute, time.Minute
	var bWaits atomic.Bool
	removeDemand := b.AddWakeDemand(bWaits.Load)
	defer removeDemand()
	s := pgx.Identifier{a.schema}.Sanitize()
	enqueue := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT `+s+`.enqueue('noop')`); err != nil {
			t.Fatal(err)
		}
	}
	// a's slow name on the time for a minute: no insert notifies.
	setRelayTime(t, pool, a.schema, time.Minute, a.relayName+slowName)
	wakes := listenForRelays(t, ctx, a, b)
	holder := func() int64 {
		t.Helper()
		var h int64
		if err := pool.QueryRow(ctx, `SELECT last_value % 1024 FROM `+s+`.spool_sql_relay`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	awaitWake := func(i int, what string) {
		t.Helper()
		select {
		case <-wakes[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("client %d heard no relay wake-up %s", i, what)
		}
	}
	// No worker of b's waits: a, polling slowly, keeps the time and
	// relays for both (it finds the insert at its next look, within
	// sqlIdleCheck).
	enqueue()
	awaitWake(1, "while a relays")
	if h := holder(); h != a.relayName+slowName {
		t.Fatalf("the time names %d with no worker waiting anywhere, want a's slow name %d", h, a.relayName+slowName)
	}
	// A worker of b's waits: b takes the time at a's next notification.
	bWaits.Store(true)
	for holder() != b.relayName {
		if ctx.Err() != nil {
			t.Fatalf("the time names %d, never b's %d", holder(), b.relayName)
		}
		enqueue()
		awaitWake(1, "before b took the time")
	}
	for _, w := range wakes {
		for len(w) > 0 {
			<-w
		}
	}
	began := time.Now()
	start := a.relayPolls.Load()
	const burst = 300
	for range burst {
		enqueue()
	}
	awaitWake(0, "after the takeover")
	awaitWake(1, "after the takeover")
	// a stopped at its first poll after the takeover: from then on it
	// looks once every sqlIdleCheck.
	if polls, limit := a.relayPolls.Load()-start, 2+2*int64(time.Since(began)/sqlIdleCheck+1); polls > limit {
		t.Errorf("the slow relay polled %d times in %s after the takeover: want at most %d", polls, time.Since(began).Round(time.Millisecond), limit)
	}
}

// listenForRelays opens a Listen on each backend until the test ends and
// returns, per backend, a channel that receives the relay's wake-ups (those
// for every queue).
func listenForRelays(t *testing.T, ctx context.Context, backends ...*Backend) []chan struct{} {
	t.Helper()
	wakes := make([]chan struct{}, len(backends))
	for i, be := range backends {
		wake := make(chan struct{}, 100000)
		wakes[i] = wake
		listening(t, ctx, be, func(w backend.Wake) {
			if w.Queue == "" {
				wake <- struct{}{}
			}
		})
	}
	return wakes
}

// listening runs b.Listen with onWake until the test ends (then it must
// end with ctx's cancellation), once it is ready.
func listening(t *testing.T, ctx context.Context, b *Backend, onWake func(backend.Wake)) {
	t.Helper()
	lctx, stop := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- b.Listen(lctx, func() { close(ready) }, onWake) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("listen: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("listen: %v", err)
	}
}

// twoRelayClients returns two backends on one scratch schema, as two
// processes, their relays named 11 and 22, and the pool they share.
func twoRelayClients(t *testing.T) (a, b *Backend, pool *pgxpool.Pool) {
	t.Helper()
	a, pool = scratchBackend(t)
	b, err := New(pool, &Options{Schema: a.schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.relayName, b.relayName = 11, 22
	return a, b, pool
}

// setRelayTime writes the relay time of schema's spool_sql_relay: ahead of
// the database's clock, under name.
func setRelayTime(t *testing.T, pool *pgxpool.Pool, schema string, ahead time.Duration, name int64) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(context.Background(), `SELECT setval('`+s+`.spool_sql_relay', (floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint + $1) * 1024 + $2)`, ahead.Microseconds(), name)
	if err != nil {
		t.Fatal(err)
	}
}
