package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// Inserts from SQL (enqueue(), a plain INSERT, COPY, Spool's own inserts in
// a caller's transaction) are announced by the insert trigger, and a
// NOTIFY serialises the commits of every notifying transaction on the
// server (schema 19's migration says why). While a client's relay holds
// spool_sql_relay, such inserts do not notify: they count themselves in
// spool_sql_enqueues and hold a shared advisory lock until their
// transaction ends, and the relay, on Listen's connection, polls both.
//
// The relay starts when a notification marked as an insert from SQL
// arrives (or at subscription, if another client's relay holds the time),
// renews the time while inserts come, stops renewing after sqlQuiet
// without one, and stops polling once the time has lapsed long enough that
// no other client can still renew it without a new notification, which
// starts it again. A client that is not relaying checks every
// sqlIdleCheck whether another client's relay holds the time, which also
// covers a notification it did not see.
const (
	// sqlPollEvery is the relay's polling interval: an insert from SQL
	// that did not notify reaches the workers this long after its commit,
	// at most, plus a claim.
	sqlPollEvery = time.Millisecond
	// sqlLease is how long one renewal of spool_sql_relay holds off the
	// notifications; it is renewed when less than half is left.
	sqlLease = 20 * time.Millisecond
	// sqlQuiet is how long the relay goes on renewing without an insert.
	sqlQuiet = 5 * time.Millisecond
	// sqlIdleCheck is how often a client that is not relaying looks
	// whether another client's relay holds the time.
	sqlIdleCheck = time.Second
)

// sqlMark ends the payload of an insert notification from SQL.
const sqlMark = " sql"

// sqlLockClass is the first key of the advisory lock inserts from SQL hold
// (the second is the oid of spool_sql_enqueues).
const sqlLockClass = 1397836887

// relay is one Listen call's state for inserts from SQL.
type relay struct {
	b      *Backend
	poll   string // the polling statement
	active bool
	primed bool      // count is set
	count  int64     // spool_sql_enqueues at the last poll
	owed   bool      // counted inserts were in flight at the last poll
	moved  time.Time // the last poll that saw the counter move or inserts in flight
	next   time.Time // the next poll
}

func newRelay(b *Backend) *relay {
	s := pgx.Identifier{b.schema}.Sanitize()
	seq := s + ".spool_sql_enqueues"
	// One round trip: the counter, whether any counted insert is still in
	// flight (a transaction-scoped lock taken and released by this
	// statement's own implicit transaction), the relay's time left, and a
	// renewal when $1 asks for one and less than half the lease is left.
	// The counter is read before the lock is tried: an insert counted in it
	// took the lock before counting, so a free lock means it has ended.
	poll := fmt.Sprintf(`SELECT e.last_value,
  pg_try_advisory_xact_lock(%d, '%s'::regclass::oid::integer),
  r.last_value - floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
  CASE WHEN $1 AND r.last_value < floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint + %d
    THEN setval('%s.spool_sql_relay', floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint + %d) END
FROM %s e, %s.spool_sql_relay r`,
		sqlLockClass, seq, sqlLease.Microseconds()/2, s, sqlLease.Microseconds(), seq, s)
	return &relay{b: b, poll: poll}
}

// deadline is when Listen's wait should end for the relay's next poll.
func (r *relay) deadline() time.Time { return r.next }

// start begins relaying now (a notification from SQL arrived): the
// counter's value at the last poll stays the baseline, so inserts counted
// since then are announced.
func (r *relay) start(now time.Time) {
	if r.active || r.b.noRelay {
		return
	}
	r.active, r.moved, r.next = true, now, now
}

// check runs one poll on conn and wakes every queue when inserts it
// counted may have committed since the last one.
func (r *relay) check(ctx context.Context, conn *pgx.Conn, onWake func(backend.Wake)) error {
	now := time.Now()
	if r.b.noRelay {
		r.next = now.Add(24 * time.Hour)
		return nil
	}
	renew := r.active && now.Sub(r.moved) < sqlQuiet
	var count, leftUS int64
	var free bool
	var renewed *int64
	err := conn.QueryRow(ctx, r.poll, renew).Scan(&count, &free, &leftUS, &renewed)
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
	if moved || (r.owed && free) {
		// Rows of the inserts counted so far are committed or on their
		// way: every queue's next claim starts at its head, as their keys
		// are unknown.
		r.b.floors.resetAll()
		onWake(backend.Wake{})
	}
	r.owed = !free && (moved || r.owed || first)
	r.count = count
	if moved || r.owed {
		r.moved = now
	}
	left := time.Duration(leftUS) * time.Microsecond
	if renewed != nil {
		left = sqlLease
	}
	switch {
	case r.active:
		// Another client's relay can renew the time only within sqlQuiet
		// (and a poll) of the last insert it saw, which this relay saw
		// too: once the time has lapsed by more than that, an insert can
		// hold it off again only after a notification, which restarts
		// this relay.
		if !moved && !r.owed && now.Sub(r.moved) >= sqlQuiet && left < -(sqlQuiet+2*sqlPollEvery) {
			r.active = false
			r.next = now.Add(sqlIdleCheck)
		} else {
			r.next = now.Add(sqlPollEvery)
		}
	case left > 0 || r.owed:
		// Another client's relay holds off the notifications.
		r.active, r.moved, r.next = true, now, now.Add(sqlPollEvery)
	default:
		r.next = now.Add(sqlIdleCheck)
	}
	return nil
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
