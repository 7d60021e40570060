package postgres

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spoolq/spool/backend"
)

// Each wake-up mode sends what it says, and only that: after commit one
// notification per insert from the waker and none from the inserting
// transaction; at commit the trigger's; off nothing. A marker notification
// sent after each insert's wake-up tells that nothing else came: the
// notifications of one channel arrive in commit order.
func TestWakeModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	after, pool := scratchBackend(t)
	next, marker := notices(t, pool, after.channel)
	insert := func(b *Backend, queue string, prio int16) []int64 {
		t.Helper()
		res, err := b.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
			{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1, Priority: prio},
			{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1, Priority: prio + 1},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res.IDs
	}
	open := func(mode string) *Backend {
		b, err := New(pool, &Options{Schema: after.schema, Wake: mode})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}

	ids := insert(after, "qa", 2)
	got := next()
	if q, k, ok := parseInsertNotice(got); !ok || q != "qa" || k.priority != 2 {
		t.Fatalf("after commit: notification %q, want queue qa at priority 2", got)
	}
	// It lists both jobs, which lets a process whose claim took them
	// send no claim for it.
	if listed := noticeIDs(got); !slices.Equal(listed, ids) {
		t.Fatalf("after commit: notification %q lists jobs %v, want %v", got, listed, ids)
	}
	marker()

	insert(open(WakeAtCommit), "qc", 3)
	// The insert trigger's notification, marked as an insert from SQL.
	atCommit, fromSQL := cutSQLMark(next())
	if !fromSQL {
		t.Errorf("at commit: notification %q is not marked as an insert from SQL", atCommit)
	}
	if q, k, ok := parseInsertNotice(atCommit); !ok || q != "qc" || k.priority != 3 {
		t.Fatalf("at commit: notification of %q priority %d, want qc at 3", q, k.priority)
	}
	marker()

	insert(open(WakeOff), "qo", 1)
	marker()

	// A caller's transaction notifies at its commit whatever the mode.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.JobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: []*backend.JobInsertParams{
		{Queue: "qt", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if q, _, ok := parseNotice(next()); !ok || q != "qt" {
		t.Fatalf("a caller's transaction: notification of %q, want qt", q)
	}
	marker()

	if _, err := New(pool, &Options{Schema: after.schema, Wake: "sometimes"}); err == nil {
		t.Fatal("wake mode 'sometimes' accepted")
	}
}

// With a wake gap, an insert after a quiet spell is announced at once, and
// inserts committed within the gap of that announcement share one
// notification per queue, sent when the gap has passed.
func TestWakeGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, pool := scratchBackend(t)
	const gap = time.Second
	b, err := New(pool, &Options{Schema: base.schema, WakeGap: gap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	next := listener(t, pool, b.channel)
	insert := func(prio int16) {
		t.Helper()
		_, err := b.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
			{Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1, Priority: prio},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	insert(5)
	first, at := next()
	if q, k, ok := parseInsertNotice(first); !ok || q != "q" || k.priority != 5 {
		t.Fatalf("first notification %q, want queue q at priority 5", first)
	}
	if took := at.Sub(start); took >= gap {
		t.Fatalf("an insert after a quiet spell was announced after %s, want it at once (gap %s)", took, gap)
	}
	insert(7)
	insert(6)
	if took := time.Since(start); took >= gap {
		t.Fatalf("the two inserts took until %s after the first, past the gap of %s: nothing left to coalesce", took, gap)
	}
	second, at := next()
	if q, k, ok := parseInsertNotice(second); !ok || q != "q" || k.priority != 6 {
		t.Fatalf("second notification %q, want one for queue q at its lowest priority, 6", second)
	}
	if at.Sub(start) < gap {
		t.Fatalf("the coalesced notification came %s after the first insert, within the gap of %s", at.Sub(start), gap)
	}
	// Nothing else was sent for the two inserts: a marker comes next.
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, 'marker')`, b.channel); err != nil {
		t.Fatal(err)
	}
	if got, _ := next(); got != "marker" {
		t.Fatalf("after the coalesced notification came %q, want only the marker", got)
	}
}

// A wake gap that is not a duration, out of range, or given with a wake
// mode that sends nothing after commit is refused by Open and New.
func TestWakeGapInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, g := range []string{"banana", "2s", "-1ms", "2ms&" + WakeParam + "=" + WakeAtCommit, "2ms&" + WakeParam + "=" + WakeOff} {
		u := testURL()
		if strings.Contains(u, "?") {
			u += "&"
		} else {
			u += "?"
		}
		b, err := Open(ctx, u+WakeGapParam+"="+g)
		if err == nil {
			b.Close()
			t.Errorf("%s=%s: opened, want an error", WakeGapParam, g)
		} else if !strings.Contains(err.Error(), "wake gap") && !strings.Contains(err.Error(), WakeGapParam) {
			t.Errorf("%s=%s: error %q does not name the wake gap", WakeGapParam, g, err)
		}
	}
}

// listener listens on channel on a connection of pool, held until the test
// ends, and returns a function that waits (up to 10 s) for the next
// notification and returns its payload and when it arrived.
func listener(t *testing.T, pool *pgxpool.Pool, channel string) func() (string, time.Time) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return func() (string, time.Time) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("wait for a notification: %v", err)
		}
		return n.Payload, time.Now()
	}
}

// notices listens on channel and returns next, the payload of the next
// notification, and marker, which sends a marker notification and fails
// the test unless the marker is what comes next: the notifications of one
// channel arrive in commit order, so nothing else was sent before it.
func notices(t *testing.T, pool *pgxpool.Pool, channel string) (next func() string, marker func()) {
	t.Helper()
	listen := listener(t, pool, channel)
	next = func() string {
		t.Helper()
		payload, _ := listen()
		return payload
	}
	marker = func() {
		t.Helper()
		if _, err := pool.Exec(context.Background(), `SELECT pg_notify($1, 'marker')`, channel); err != nil {
			t.Fatal(err)
		}
		if got := next(); got != "marker" {
			t.Fatalf("came %q, want only the marker", got)
		}
	}
	return next, marker
}

// A finish announces what it makes pending and due at once (a release, a
// snooze without delay), as a plain insert would, and nothing else: by the
// waker after the finish's commit when the finish runs on the pool of a
// backend with one, for jobs held in lease rows as for jobs claimed in
// place (whose update the trigger does not see); otherwise in the
// finish's transaction, by the insert trigger for the rows a leased
// finish writes back and by a notification for those updated in place,
// in a caller's transaction only at its commit. The trigger is told to
// return at once for the rest (quietSettings).
func TestFinishWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWakeScratch(t)
	b, pool, inserter, listen := w.b, w.pool, w.inserter, w.listen
	marker := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, 'marker')`, b.channel); err != nil {
			t.Fatal(err)
		}
		if got, _ := listen(); got != "marker" {
			t.Fatalf("came %q, want only the marker", got)
		}
	}
	for _, tc := range []struct {
		name, queue string
		opts        Options
		// inTx finishes in a caller's transaction: announced at its commit.
		inTx bool
	}{
		{"trigger", "qt", Options{Wake: WakeOff, Claims: ClaimsLeaseRows}, false},
		{"waker, lease rows", "ql", Options{Claims: ClaimsLeaseRows}, false},
		{"waker, in place", "qp", Options{Claims: ClaimsInPlace}, false},
		{"no waker, in place", "qc", Options{Wake: WakeAtCommit, Claims: ClaimsInPlace}, false},
		{"caller's transaction, in place", "qx", Options{Claims: ClaimsInPlace}, true},
		{"caller's transaction, lease rows", "qy", Options{Claims: ClaimsLeaseRows}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := w.open(t, tc.opts)
			jobs := make([]*backend.JobInsertParams, 8)
			for i := range jobs {
				jobs[i] = &backend.JobInsertParams{Queue: tc.queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5}
			}
			if _, err := inserter.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: tc.queue, Max: 8, Lease: time.Minute, ClaimID: "c#1"})
			if err != nil || len(rows) != 8 {
				t.Fatalf("claim: %d rows, %v", len(rows), err)
			}
			finish := func(fs ...backend.JobFinish) {
				t.Helper()
				if !tc.inTx {
					res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
					if err != nil || len(res.Rejected) > 0 {
						t.Fatalf("finish: %+v, %v", res, err)
					}
					return
				}
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Tx: tx, Finishes: fs})
				if err != nil || len(res.Rejected) > 0 {
					t.Fatalf("finish: %+v, %v", res, err)
				}
				marker() // nothing is announced before the commit
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			lease := func(i int) backend.LeaseRef { return backend.LeaseRef{ID: rows[i].ID, Fence: rows[i].Fence} }

			finish(backend.JobFinish{Lease: lease(0), Outcome: backend.OutcomeComplete})
			marker()
			finish(backend.JobFinish{Lease: lease(1), Outcome: backend.OutcomeRetry, Delay: time.Second},
				backend.JobFinish{Lease: lease(2), Outcome: backend.OutcomeSnooze, Delay: time.Second},
				backend.JobFinish{Lease: lease(3), Outcome: backend.OutcomeDiscard})
			marker()
			// A release beside a success, a snooze without delay beside a
			// retry, each in one batch.
			for _, pair := range [][2]backend.JobFinish{
				{{Lease: lease(4), Outcome: backend.OutcomeRelease}, {Lease: lease(5), Outcome: backend.OutcomeComplete}},
				{{Lease: lease(6), Outcome: backend.OutcomeSnooze}, {Lease: lease(7), Outcome: backend.OutcomeRetry, Delay: time.Hour}},
			} {
				finish(pair[0], pair[1])
				got, _ := listen()
				if q, _, ok := parseNotice(got); !ok || q != tc.queue {
					t.Fatalf("outcome %d: notification %q, want one for queue %s", pair[0].Outcome, got, tc.queue)
				}
				marker()
			}
		})
	}
}

// wakeScratch is a scratch schema for the wake-up tests, with an inserter
// that announces nothing (its inserts wake no one) and a listener on the
// schema's channel.
type wakeScratch struct {
	b        *Backend
	pool     *pgxpool.Pool
	inserter *Backend
	listen   func() (string, time.Time)
}

func newWakeScratch(t *testing.T) *wakeScratch {
	t.Helper()
	b, pool := scratchBackend(t)
	inserter, err := New(pool, &Options{Schema: b.schema, Wake: WakeOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inserter.Close() })
	return &wakeScratch{b: b, pool: pool, inserter: inserter, listen: listener(t, pool, b.channel)}
}

// open opens a backend with opts on the scratch schema, closed with the
// test.
func (w *wakeScratch) open(t *testing.T, opts Options) *Backend {
	t.Helper()
	opts.Schema = w.b.schema
	be, err := New(w.pool, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// TestReleaseClaimWakes: jobs handed back by JobReleaseClaim (a claim whose
// reply was lost) are announced to other processes, whether the claim held
// them in place or in lease rows, through the waker or at once.
func TestReleaseClaimWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWakeScratch(t)
	inserter, listen := w.inserter, w.listen
	for _, tc := range []struct {
		name, queue string
		opts        Options
	}{
		{"waker, in place", "rp", Options{Claims: ClaimsInPlace}},
		{"waker, lease rows", "rl", Options{Claims: ClaimsLeaseRows}},
		{"no waker, in place", "rc", Options{Wake: WakeAtCommit, Claims: ClaimsInPlace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := w.open(t, tc.opts)
			jobs := []*backend.JobInsertParams{
				{Queue: tc.queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5},
				{Queue: tc.queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 5},
			}
			if _, err := inserter.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
				t.Fatal(err)
			}
			claimID := "lost#" + tc.queue
			if rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: tc.queue, Max: 2, Lease: time.Minute, ClaimID: claimID}); err != nil || len(rows) != 2 {
				t.Fatalf("claim: %d rows, %v", len(rows), err)
			}
			n, err := be.JobReleaseClaim(ctx, &backend.JobReleaseClaimParams{ClaimID: claimID})
			if err != nil || n != 2 {
				t.Fatalf("release: %d jobs, %v", n, err)
			}
			got, _ := listen()
			if q, _, ok := parseNotice(got); !ok || q != tc.queue {
				t.Fatalf("notification %q, want one for queue %s", got, tc.queue)
			}
		})
	}
}

// parseNotice parses an insert notification from the waker or, without its
// mark, from the insert trigger.
func parseNotice(payload string) (string, claimKey, bool) {
	payload, _ = cutSQLMark(payload)
	return parseInsertNotice(payload)
}

// A lone job inserted outside a caller's transaction is announced by its
// own transaction (insert_wake_now.sql), with the waker's payload, and a
// job scheduled for later by nobody; while another insert of the backend
// is in flight, and for two jobs or a unique one, the job goes to the
// waker instead. The waker is stopped first, so a notification can
// only come from the insert's transaction and the waker's pending keys
// show what was handed to it.
func TestWakeLoneInsertAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, pool := scratchBackend(t)
	b.cancel()
	<-b.waker.done
	next, marker := notices(t, pool, b.channel)
	job := func(queue string) *backend.JobInsertParams {
		return &backend.JobInsertParams{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1, Priority: 4}
	}
	insert := func(jobs ...*backend.JobInsertParams) *backend.JobInsertManyResult {
		t.Helper()
		res, err := b.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != len(jobs) || len(res.IDs) != len(jobs) {
			t.Fatalf("inserted %d of %d jobs, ids %v", res.Count, len(jobs), res.IDs)
		}
		return res
	}
	pending := func(want ...string) {
		t.Helper()
		got := b.waker.take()
		if len(got) != len(want) {
			t.Fatalf("the waker holds %v, want queues %v", got, want)
		}
		for _, q := range want {
			if _, ok := got[q]; !ok {
				t.Fatalf("the waker holds %v, want queues %v", got, want)
			}
		}
	}

	lone := insert(job("lone"))
	got := next()
	if q, k, ok := parseInsertNotice(got); !ok || q != "lone" || k.priority != 4 {
		t.Fatalf("lone insert: notification %q, want queue lone at priority 4", got)
	}
	if listed := noticeIDs(got); !slices.Equal(listed, lone.IDs) {
		t.Fatalf("lone insert: notification %q lists jobs %v, want %v", got, listed, lone.IDs)
	}
	if _, fromSQL := cutSQLMark(got); fromSQL {
		t.Fatalf("lone insert: notification %q is marked as an insert from SQL", got)
	}
	marker()
	pending()

	later := job("later")
	at := time.Now().Add(time.Hour)
	later.RunAt = &at
	insert(later)
	marker()
	pending()

	// Another insert of the backend in flight: this one goes to the
	// waker.
	b.inserting.Add(1)
	insert(job("busy"))
	b.inserting.Add(-1)
	marker()
	pending("busy")

	insert(job("two"), job("two"))
	marker()
	pending("two")

	unique := job("unique")
	unique.UniqueKey, unique.UniqueStates = "u1", 15
	insert(unique)
	marker()
	pending("unique")
}

// TestWakeKeysListJobs: the waker's notification for a queue lists every
// job inserted into it since its last send, and none once a key was noted
// without its job (a release, a rescue: a process must claim for it) or
// the list outgrows maxNoticeIDs.
func TestWakeKeysListJobs(t *testing.T) {
	at := time.UnixMicro(1700000000000000).UTC()
	var m queueKeys
	m.noteJob("a", claimKey{priority: 1, runAt: at, id: 7})
	m.noteJob("a", claimKey{priority: 0, runAt: at, id: 9})
	m.noteJob("b", claimKey{priority: 2, runAt: at, id: 8})
	m.note("b", claimKey{priority: 2, runAt: at, id: 3})
	got := duePayloads(m)
	slices.Sort(got)
	want := []string{"a 0 1700000000000000 7,9", "b 2 1700000000000000"}
	if !slices.Equal(got, want) {
		t.Fatalf("payloads %q, want %q", got, want)
	}
	var w queueKeys
	for id := range int64(maxNoticeIDs + 1) {
		w.noteJob("a", claimKey{runAt: at, id: id + 1})
	}
	if p := duePayloads(w); len(p) != 1 || noticeIDs(p[0]) != nil {
		t.Fatalf("%d jobs: payloads %q, want one listing none", maxNoticeIDs+1, p)
	}
	// The waker merges an insert's keys into what it holds.
	var pending queueKeys
	pending.merge("a", m["a"])
	pending.merge("a", wakeKey{key: claimKey{runAt: at, id: 11}, ids: []int64{11}})
	if !slices.Equal(pending["a"].ids, []int64{7, 9, 11}) || !slices.Equal(m["a"].ids, []int64{7, 9}) {
		t.Fatalf("merged %v (the insert's own list now %v), want 7 9 11 (7 9)", pending["a"].ids, m["a"].ids)
	}
}
