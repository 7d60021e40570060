package mysql

import (
	"strconv"
	"strings"
	"time"
)

// queries holds the fixed statements, built once per database from the
// templates below. {{db}} is the quoted database; nothing else is spliced in
// from outside. Statements over a batch get their id lists appended at run
// time by inList: those are integers the backend itself formats with strconv
// (ids and fences it read from the database), never caller text. Every string
// value is bound.
//
// MySQL evaluates a single-table UPDATE's assignments left to right, each
// seeing the ones before it, while MariaDB's SIMULTANEOUS_ASSIGNMENT mode (a
// caller's session may use it) and multiple-table UPDATEs do not promise an
// order. Every UPDATE below is written so both readings agree: a column is
// never read after it is assigned, except by its own assignment.
type queries struct {
	claimSelect, claimUpdate                 string
	window, optimisticUpdate, optimisticWon  string
	lockForFinish, complete, deleteDone      string
	finishOther                              string
	heartbeat, heartbeatCheck, releaseClaim  string
	rescueSelect, rescueUpdate, cleanup      string
	insertHead, get, listHead, retry, cancel string
	stats, leaderUpdate, leaderInsert        string
	leaderResign, schemaVersion              string
}

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state, priority, run_at, attempt, max_attempts, fence,
  leased_until, leased_by, created_at, attempted_at, finalized_at, errors, tags, metadata`

// nowJSON is the database's now as an RFC 3339 string, for error histories.
const nowJSON = `DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ')`

// pendingStates is the SQL list of pending states.
const pendingStates = `('available', 'scheduled', 'retryable')`

func buildQueries(db string) queries {
	r := strings.NewReplacer("{{db}}", db, "{{cols}}", jobColumns, "{{nowjson}}", nowJSON, "{{pending}}", pendingStates)
	q := queries{
		// Pessimistic claim, in a READ COMMITTED transaction: lock up to n due
		// pending rows of a queue in claim order from the claim index,
		// skipping rows others hold; no gap locks, no waits. The suffix
		// "LIMIT n FOR UPDATE SKIP LOCKED" is appended. The database's now
		// comes back with the rows and is the base of the lease.
		claimSelect: `SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE queue = ? AND pending = 1 AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id`,
		// The claim itself, by primary key, on rows this transaction holds.
		// Params: now, lease (µs), claim id, now; then the id list.
		claimUpdate: `UPDATE {{db}}.spool_jobs SET state = 'running', attempt = attempt + 1, fence = fence + 1,
  leased_until = CAST(? AS DATETIME(6)) + INTERVAL ? MICROSECOND, leased_by = ?, attempted_at = CAST(? AS DATETIME(6))
WHERE state IN {{pending}} AND id IN `,

		// Optimistic window: the queue's head, read without locks. "LIMIT n"
		// is appended.
		window: `SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE queue = ? AND pending = 1 AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority, run_at, id`,
		// Optimistic claim: applies only to rows whose fence (their version)
		// is still the one read, and that are still pending and due. The id
		// list and "AND (id, fence) IN (…)" are appended.
		optimisticUpdate: `UPDATE {{db}}.spool_jobs SET state = 'running', attempt = attempt + 1, fence = fence + 1,
  leased_until = CAST(? AS DATETIME(6)) + INTERVAL ? MICROSECOND, leased_by = ?, attempted_at = CAST(? AS DATETIME(6))
WHERE pending = 1 AND run_at <= UTC_TIMESTAMP(6) AND id IN `,
		// Which of the picked rows this claim won, when not all of them.
		optimisticWon: `SELECT id FROM {{db}}.spool_jobs WHERE leased_by = ? AND state = 'running' AND id IN `,

		// Finish, in one transaction: lock the batch's rows by primary key
		// (ascending: the IN list is scanned in order) and read their lease,
		// so the backend knows exactly which outcomes apply before writing.
		lockForFinish: `SELECT id, fence, state FROM {{db}}.spool_jobs WHERE id IN `,
		complete: `UPDATE {{db}}.spool_jobs SET state = 'completed', finalized_at = UTC_TIMESTAMP(6),
  leased_until = NULL, leased_by = NULL
WHERE state = 'running' AND id IN `,
		deleteDone: `DELETE FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN `,
		// Every other outcome, as one single-table UPDATE: the SET list is
		// built per batch by finishOtherSet (CASE expressions over the ids,
		// error texts bound) and "AND id IN (…)" is appended. A multiple-table
		// UPDATE joined to a derived table of the outcomes would need a
		// temporary table whenever the optimizer reads the derived table first,
		// and MariaDB 10.11.19 was seen to crash (signal 11 in
		// Create_tmp_table::cleanup_on_failure) when creating that table failed
		// under load; a single-table UPDATE never creates one.
		finishOther: `UPDATE {{db}}.spool_jobs SET {{set}}
WHERE state = 'running' AND id IN `,

		// Heartbeat: extend live leases; "id IN (…) AND (id, fence) IN (…)"
		// is appended. When fewer rows match than leases were sent,
		// heartbeatCheck finds which still hold.
		heartbeat: `UPDATE {{db}}.spool_jobs SET leased_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE state = 'running' AND id IN `,
		heartbeatCheck: `SELECT id, fence FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN `,

		// Release claim: the jobs of one claim call that its caller never
		// received go back, attempt given back; the fence keeps the lost lease
		// void. Running rows are the non-null part of the leased index.
		releaseClaim: `UPDATE {{db}}.spool_jobs SET state = 'available', attempt = attempt - 1, leased_until = NULL, leased_by = NULL
WHERE leased_until IS NOT NULL AND leased_by = ? AND state = 'running'`,

		// Rescue, in one transaction: lock expired leases (SKIP LOCKED where
		// the server has it; "LIMIT n FOR UPDATE [SKIP LOCKED]" is appended),
		// then return them to the queue or discard them at max attempts. A
		// rescued job keeps its run_at, and so its place in the queue.
		rescueSelect: `SELECT id, attempt, max_attempts FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_leased)
WHERE leased_until < UTC_TIMESTAMP(6) ORDER BY leased_until`,
		rescueUpdate: `UPDATE {{db}}.spool_jobs SET
  errors = JSON_ARRAY_APPEND(COALESCE(errors, JSON_ARRAY()), '$', JSON_OBJECT('attempt', attempt, 'at', {{nowjson}},
    'error', CONCAT('lease expired: the worker ', COALESCE(leased_by, ''), ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))),
  finalized_at = IF(attempt >= max_attempts, UTC_TIMESTAMP(6), NULL),
  state = IF(attempt >= max_attempts, 'discarded', 'retryable'),
  leased_by = NULL,
  leased_until = NULL
WHERE state = 'running' AND leased_until < UTC_TIMESTAMP(6) AND id IN `,

		// Cleanup: params are the smallest positive age, then each state's
		// age twice (0 keeps that state), then the limit; all ages in µs.
		cleanup: `DELETE FROM {{db}}.spool_jobs
WHERE finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
  AND ((state = 'completed' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'discarded' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)
    OR (state = 'cancelled' AND ? > 0 AND finalized_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND))
ORDER BY finalized_at
LIMIT ?`,

		// Insert: the row tuples are appended (see insert.go).
		insertHead: `INSERT INTO {{db}}.spool_jobs
  (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata, created_at) VALUES `,

		get:      `SELECT {{cols}} FROM {{db}}.spool_jobs WHERE id = ?`,
		listHead: `SELECT {{cols}} FROM {{db}}.spool_jobs WHERE id > ?`,

		// Retry: a finished or pending job becomes available now with a fresh
		// set of attempts. fence is kept, so old leases stay fenced out.
		retry: `UPDATE {{db}}.spool_jobs SET state = 'available', attempt = 0, run_at = UTC_TIMESTAMP(6), finalized_at = NULL
WHERE id = ? AND state <> 'running'`,
		// Cancel: a running job keeps no lease; its holder sees the loss at
		// its next heartbeat and its late writes are fenced out by state.
		cancel: `UPDATE {{db}}.spool_jobs SET state = 'cancelled', finalized_at = UTC_TIMESTAMP(6), leased_until = NULL, leased_by = NULL
WHERE id = ? AND state NOT IN ('completed', 'discarded', 'cancelled')`,

		stats: `SELECT queue, CAST(state AS CHAR), COUNT(*) FROM {{db}}.spool_jobs GROUP BY queue, state ORDER BY queue, state`,

		// Leader election: renew or take over an expired term; when no row
		// exists, the insert takes it and a duplicate key means another
		// client won. elected_at is read before leader_id is assigned.
		leaderUpdate: `UPDATE {{db}}.spool_leader
SET elected_at = IF(leader_id = ?, elected_at, UTC_TIMESTAMP(6)), leader_id = ?,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND (leader_id = ? OR expires_at < UTC_TIMESTAMP(6))`,
		leaderInsert: `INSERT INTO {{db}}.spool_leader (name, leader_id, elected_at, expires_at)
VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`,
		leaderResign: `DELETE FROM {{db}}.spool_leader WHERE name = ? AND leader_id = ?`,

		schemaVersion: `SELECT COALESCE(MAX(version), 0) FROM {{db}}.spool_migrations`,
	}
	for _, p := range []*string{&q.claimSelect, &q.claimUpdate, &q.window, &q.optimisticUpdate, &q.optimisticWon,
		&q.lockForFinish, &q.complete, &q.deleteDone, &q.finishOther, &q.heartbeat, &q.heartbeatCheck,
		&q.releaseClaim, &q.rescueSelect, &q.rescueUpdate, &q.cleanup, &q.insertHead, &q.get, &q.listHead,
		&q.retry, &q.cancel, &q.stats, &q.leaderUpdate, &q.leaderInsert, &q.leaderResign, &q.schemaVersion} {
		*p = r.Replace(*p)
	}
	return q
}

// inList formats integers as a parenthesised SQL list: (1,2,3).
func inList(ids []int64) string {
	var b strings.Builder
	b.Grow(len(ids)*8 + 2)
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(')')
	return b.String()
}

// leaseList formats (id, fence) pairs as a SQL row list: ((1,2),(3,4)).
func leaseList(ids []int64, fences []int32) string {
	var b strings.Builder
	b.Grow(len(ids)*12 + 2)
	b.WriteByte('(')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(int64(fences[i]), 10))
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// sqlTime formats a time as a DATETIME(6) literal value in UTC, to be bound
// and CAST: the driver's own conversion of time.Time depends on the
// connection's loc setting, which a caller's connection may set otherwise.
func sqlTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999")
}

func micros(d time.Duration) int64 { return d.Microseconds() }
