package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Inserts from SQL (enqueue(), a plain INSERT, COPY, Spool's own inserts in
// a caller's transaction) are announced at commit, and a NOTIFY serialises
// the commits of every notifying transaction on the server (schema 19's
// migration says why). While one client's relay holds spool_sql_relay,
// such inserts do not notify: they count themselves in spool_sql_enqueues
// and hold a shared advisory lock until their transaction ends, and the
// relay, on its Listen connection, polls both and notifies every client
// (relayPayload) in a transaction that writes nothing, so its commit
// holds the notification lock only briefly.
//
// A relay starts when a notification marked as an insert from SQL arrives
// and takes the time if no other relay holds it; one that finds another's
// name on the time stops (that one notifies for everybody). The holder
// renews the time while inserts come, stops renewing after a quiet spell
// without one, and stops polling once the time has lapsed. A client that
// is not relaying checks every sqlIdleCheck whether inserts were counted
// while nobody relayed them (a relay that died), and relays them.
//
// The polls and the notifications they send cost the server and the
// client about as much as the inserting sessions' own work while inserts
// stream, so a relay polls every sqlPollEvery only while its client has
// an idle worker (backend.WakeDemand); otherwise every sqlPollSlow, since
// a queue whose workers are all busy starts no job before one finishes and
// keeps a wake-up until its next claim (a worker that falls idle just
// before the late one comes waits for it, up to sqlPollSlow). A relay
// polling slowly says so in its name (slowName), and a relay whose client
// has an idle worker takes the time from it: at its next look, which a
// relay notification it hears brings forward, so a client whose workers
// wait for jobs is the one that relays them promptly.
const (
	// sqlPollEvery is the relay's polling interval while its client has an
	// idle worker: an insert from SQL that did not notify reaches the
	// workers about this long after its commit, at most, plus
	// a notification and a claim.
	sqlPollEvery = time.Millisecond
	// sqlPollSlow is the interval while no worker of the relay's client is
	// idle: the bound on how late a wake-up comes to
	// another client's idle worker until that client's relay takes over.
	sqlPollSlow = 10 * time.Millisecond
	// sqlLease is how long one renewal of spool_sql_relay holds off the
	// notifications; it is renewed when less than half is left.
	sqlLease = 50 * time.Millisecond
	// sqlQuiet is how long a relay polling every sqlPollEvery goes on
	// renewing without an insert; sqlQuietSlow one polling every
	// sqlPollSlow (above its interval, so that a stream of inserts keeps
	// the time held).
	sqlQuiet     = 5 * time.Millisecond
	sqlQuietSlow = 3 * sqlPollSlow
	// sqlIdleCheck is how often a client that is not relaying looks at the
	// counter.
	sqlIdleCheck = time.Second
)

// sqlMark ends the payload of an insert notification from SQL.
const sqlMark = " sql"

// relayPayload is the relay's notification: every queue may have jobs
// inserted from SQL (their keys are unknown). A client before schema 19
// reads it as a queue named "*", which none is.
const relayPayload = "*" + sqlMark

// sqlLockClass is the first key of the advisory lock inserts from SQL hold
// (the second is the oid of spool_sql_enqueues).
const sqlLockClass = 1397836887

// relayNames is how many names spool_sql_relay can hold (its value is the
// time times relayNames plus the name). A relay's name is below slowName;
// it adds slowName while it polls every sqlPollSlow.
const (
	relayNames = 1024
	slowName   = relayNames / 2
)

// relay is one Listen call's state for inserts from SQL.
type relay struct {
	b    *Backend
	poll string // the polling statement
	name int64  // 1 to slowName-1
	// lease and quiet are sqlLease and sqlQuiet, or the Backend's
	// replacements (tests).
	lease, quiet time.Duration
	active       bool
	// fast is whether the client had an idle worker at the last poll (it
	// then polls every sqlPollEvery).
	fast bool
	// slowHolder is whether the last poll found the time held by another
	// relay polling slowly, which a fast one takes it from.
	slowHolder bool
	primed     bool      // count is set
	count      int64     // spool_sql_enqueues at the last poll
	owed       bool      // counted inserts were in flight at the last poll
	moved      time.Time // the last poll that saw the counter move or inserts in flight
	next       time.Time // the next poll
	// kick (buffered 1) asks send to notify every client. The
	// notification goes from a connection of the pool, not from the
	// polling one: a NOTIFY waits for the server's notification lock,
	// which other notifying commits hold across their WAL flush (those of
	// another database too), and the polls must go on renewing the time
	// meanwhile.
	kick chan struct{}
}

// send notifies every client, once for each kick that arrived since the
// last notification, until ctx ends. A notification that fails is left to
// the next kick and the workers' poll.
func (r *relay) send(ctx context.Context) {
	for {
		select {
		case <-r.kick:
			_, _ = r.b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, r.b.channel, relayPayload)
		case <-ctx.Done():
			return
		}
	}
}

func newRelay(b *Backend) *relay {
	s := pgx.Identifier{b.schema}.Sanitize()
	seq := s + ".spool_sql_enqueues"
	now := `floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`
	// One round trip: the counter, whether any counted insert is still in
	// flight (a transaction-scoped lock taken and released by this
	// statement's own implicit transaction), the time left and the relay
	// it names, and a write of the time under this relay's name ($2, with
	// slowName added while it polls slowly) when $1 asks for a renewal,
	// the time is this relay's or has passed, and less than half the
	// lease is left; or when $3 (a relay polling fast) asks to take the
	// time from another relay that polls slowly. The counter is read
	// before the lock is tried: an insert counted in it took the lock
	// before counting, so a free lock means it has ended.
	// The counter is last_value less one until the sequence's first
	// nextval (is_called false: last_value 1 then, and 1 after it too), so
	// the first insert ever counted moves it.
	lease, quiet := sqlLease, sqlQuiet
	if b.relayLease > 0 {
		lease = b.relayLease
	}
	if b.relayQuiet > 0 {
		quiet = b.relayQuiet
	}
	poll := fmt.Sprintf(`SELECT e.last_value - (NOT e.is_called)::integer,
  pg_try_advisory_xact_lock(%[1]d, '%[2]s'::regclass::oid::integer),
  r.last_value / %[3]d - %[4]s,
  r.last_value %% %[3]d,
  CASE WHEN $1 AND (r.last_value %% %[8]d = $2::bigint %% %[8]d OR r.last_value / %[3]d <= %[4]s)
      AND r.last_value / %[3]d < %[4]s + %[5]d
    OR $3::boolean AND r.last_value %% %[3]d >= %[8]d AND r.last_value %% %[8]d <> $2 %% %[8]d
    THEN setval('%[6]s.spool_sql_relay', (%[4]s + %[7]d) * %[3]d + $2) END
FROM %[2]s e, %[6]s.spool_sql_relay r`,
		sqlLockClass, seq, relayNames, now, lease.Microseconds()/2, s, lease.Microseconds(), slowName)
	name := b.relayName
	if name == 0 {
		name = 1 + rand.Int64N(slowName-1)
	}
	return &relay{b: b, poll: poll, name: name, lease: lease, quiet: quiet, kick: make(chan struct{}, 1)}
}

// deadline is when Listen's wait should end for the relay's next poll.
func (r *relay) deadline() time.Time { return r.next }

// heard brings the next poll forward when another relay's notification
// arrives while that relay polls slowly and this client has an idle
// worker: the poll takes the time from it.
func (r *relay) heard(now time.Time) {
	if !r.active && r.slowHolder && !r.b.noRelay && r.b.demands.Waiting() {
		r.next = now
	}
}

// start begins relaying now (a notification from SQL arrived): the
// counter's value at the last poll stays the baseline, so inserts counted
// since then are announced.
func (r *relay) start(now time.Time) {
	if r.active || r.b.noRelay {
		return
	}
	r.active, r.moved, r.next = true, now, now
}

// check runs one poll on conn and notifies every client when inserts
// counted may have committed since the last one. With nc (conn's network
// connection) set, the poll runs without ctx: ctx's end must then set nc's
// read deadline (Listen's loop), and check clears a deadline left by a
// wait before it polls.
func (r *relay) check(ctx context.Context, conn *pgx.Conn, nc net.Conn) error {
	now := time.Now()
	if r.b.noRelay {
		r.next = now.Add(24 * time.Hour)
		return nil
	}
	qctx := ctx
	if nc != nil {
		if err := nc.SetReadDeadline(time.Time{}); err != nil {
			return fmt.Errorf("relay inserts from SQL: %w", err)
		}
		// Cleared before ctx is tested, as Listen sets its deadlines.
		if err := ctx.Err(); err != nil {
			return err
		}
		qctx = context.Background()
	}
	r.b.relayPolls.Add(1)
	r.fast = r.b.demands.Waiting()
	every, quiet, name := sqlPollEvery, r.quiet, r.name
	if !r.fast {
		every, quiet, name = sqlPollSlow, sqlQuietSlow, r.name+slowName
	}
	renew := r.active && now.Sub(r.moved) < quiet
	var count, leftUS, holder int64
	var free bool
	var renewed *int64
	err := conn.QueryRow(qctx, r.poll, renew, name, r.fast).Scan(&count, &free, &leftUS, &holder, &renewed)
	if err != nil {
		if isUndefined(err) {
			// A schema before version 19: there is nothing to relay.
			r.active, r.next = false, time.Now().Add(24*time.Hour)
			return nil
		}
		return fmt.Errorf("relay inserts from SQL: %w", err)
	}
	now = time.Now()
	first := !r.primed
	r.primed = true
	moved := count != r.count && !first
	left := time.Duration(leftUS) * time.Microsecond
	if renewed != nil {
		holder, left = name, r.lease
		if !r.active {
			// Taken from a relay polling slowly: this one relays from now
			// on, and that one stops at its next poll, dropping what it
			// owed. Inserts in flight now may be those: they are owed
			// here, announced once the lock is free.
			r.active, r.moved, r.owed = true, now, true
		}
	}
	r.count = count
	r.slowHolder = false
	if left > 0 && holder%slowName != r.name {
		// Another relay holds the time and notifies for everybody.
		r.slowHolder = holder >= slowName
		r.active, r.owed, r.next = false, false, now.Add(sqlIdleCheck)
		return nil
	}
	if moved || (r.owed && free) {
		// Rows of the inserts counted so far are committed or on their
		// way; their keys are unknown, so every queue is woken.
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	r.owed = !free && (moved || r.owed || first)
	if moved || r.owed {
		r.moved = now
		if !r.active {
			// Counted while nobody relayed (a relay that died) or still in
			// flight: relay until they have ended.
			r.active = true
		}
	}
	switch {
	case !r.active:
		r.next = now.Add(sqlIdleCheck)
	case !moved && !r.owed && now.Sub(r.moved) >= quiet && left < -sqlPollEvery:
		// The time has lapsed and nothing is in flight: an insert from now
		// on notifies, which starts the relay again.
		r.active, r.next = false, now.Add(sqlIdleCheck)
	default:
		r.next = now.Add(every)
	}
	return nil
}

// AddWakeDemand implements backend.WakeDemand: while none of the
// registered functions reports an idle worker, Listen's relay of inserts
// from SQL polls every sqlPollSlow instead of every sqlPollEvery.
func (b *Backend) AddWakeDemand(waiting func() bool) (remove func()) {
	return b.demands.Add(waiting)
}

// isUndefined reports an error for a table or function the schema lacks.
func isUndefined(err error) bool {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		switch pgErr.SQLState() {
		case "42P01", "42883":
			return true
		}
	}
	return false
}

// cutSQLMark reports whether payload is an insert notification from SQL,
// and returns it without the mark.
func cutSQLMark(payload string) (string, bool) {
	return strings.CutSuffix(payload, sqlMark)
}
