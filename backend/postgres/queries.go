package postgres

import "strings"

// queries holds every statement the backend runs, built once per schema from
// the templates below. {{s}} is the quoted schema; nothing else is spliced in,
// every value is bound.
type queries struct {
	claim, releaseClaim, finish, heartbeat, rescue, cleanup string
	completeKeep, completeDelete, probeBelow                string
	insert, now                                             string
	get, list, retry, cancel, stats                         string
	leaderElect, leaderResign                               string
	schemaVersion                                           string
	optimisticWindow, optimisticClaim                       string
}

// jobColumns is the column list every JobRow scan reads, in scanJob's order.
const jobColumns = `id, queue, kind, args, state::text, priority, run_at, attempt, max_attempts, fence,
  leased_until, coalesce(leased_by, ''), created_at, attempted_at, finalized_at, errors, tags, metadata`

// jobColumnsJ is jobColumns qualified by the alias j, for UPDATE … RETURNING.
const jobColumnsJ = `j.id, j.queue, j.kind, j.args, j.state::text, j.priority, j.run_at, j.attempt, j.max_attempts,
  j.fence, j.leased_until, coalesce(j.leased_by, ''), j.created_at, j.attempted_at, j.finalized_at, j.errors, j.tags,
  j.metadata`

func buildQueries(schema string) queries {
	r := strings.NewReplacer("{{s}}", schema, "{{cols}}", jobColumns, "{{jcols}}", jobColumnsJ)
	q := queries{
		// Claim: lock up to $2 due pending rows of queue $1 in claim order,
		// skipping rows other claimers hold, and lease them ($3 microseconds,
		// on the DB clock) to claim $4. Rows of the floor's priority $5 are
		// read only above the floor ($5, $6, $7; floor.go); rows of a higher
		// priority (lower number) always, so a job of a higher priority that
		// became due (a scheduled job, a retry) is never behind a floor.
		// MATERIALIZED keeps each LIMIT binding: without it the planner may
		// re-run a subquery per row and lock more rows than it claims.
		claim: `WITH higher AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < $5::smallint
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)
  ORDER BY priority, run_at, id
  LIMIT $2 - (SELECT count(*) FROM higher)
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = j.fence + 1,
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM (SELECT id FROM higher UNION ALL SELECT id FROM above) picked WHERE j.id = picked.id
RETURNING {{jcols}}`,

		// Release claim: the jobs of one claim call that its caller never
		// received go back, attempt given back; the fence keeps the lost
		// lease void. Scans only running rows (the leased index).
		releaseClaim: `UPDATE {{s}}.spool_jobs j
SET state = 'available', attempt = j.attempt - 1, leased_until = NULL, leased_by = NULL
WHERE j.state = 'running' AND j.leased_by = $1`,

		// Finish: every outcome of a batch in one statement, each row guarded
		// by (id, fence, running). Outcome codes match backend.Outcome:
		// 1 complete, 2 retry, 3 snooze, 4 cancel, 5 discard, 6 release.
		// $6 deletes completed rows instead of keeping them. Rows applied come
		// back as (id, fence), with queue, priority and run_at where the row
		// is pending again (queue NULL otherwise), to lower claim floors.
		finish: `WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::integer[], $3::smallint[], $4::bigint[], $5::jsonb[])
    AS t(id, fence, outcome, delay_us, err)
),
deleted AS (
  DELETE FROM {{s}}.spool_jobs j USING input i
  WHERE $6 AND i.outcome = 1 AND j.id = i.id AND j.fence = i.fence AND j.state = 'running'
  RETURNING j.id, j.fence, NULL::text AS queue, j.priority, j.run_at
),
updated AS (
  UPDATE {{s}}.spool_jobs j SET
    state = (CASE
      WHEN i.outcome = 1 THEN 'completed'
      WHEN i.outcome = 2 AND j.attempt >= j.max_attempts THEN 'discarded'
      WHEN i.outcome = 2 THEN 'retryable'
      WHEN i.outcome = 3 AND i.delay_us > 0 THEN 'scheduled'
      WHEN i.outcome = 4 THEN 'cancelled'
      WHEN i.outcome = 5 THEN 'discarded'
      ELSE 'available'
    END)::{{s}}.spool_job_state,
    run_at = CASE WHEN i.outcome IN (2, 3) THEN now() + i.delay_us * interval '1 microsecond' ELSE j.run_at END,
    attempt = CASE WHEN i.outcome IN (3, 6) THEN j.attempt - 1 ELSE j.attempt END,
    finalized_at = CASE
      WHEN i.outcome IN (1, 4, 5) OR (i.outcome = 2 AND j.attempt >= j.max_attempts) THEN now()
    END,
    leased_until = NULL,
    leased_by = NULL,
    errors = CASE WHEN i.err IS NULL THEN j.errors
      ELSE coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(i.err || jsonb_build_object('at', now()))
    END
  FROM input i
  WHERE NOT ($6 AND i.outcome = 1) AND j.id = i.id AND j.fence = i.fence AND j.state = 'running'
  RETURNING j.id, j.fence, CASE WHEN j.state IN ('available', 'retryable', 'scheduled') THEN j.queue END, j.priority, j.run_at
)
SELECT * FROM deleted UNION ALL SELECT * FROM updated`,

		// Probe below a claim floor ($2, $3, $4): the lowest due pending key
		// of the floor's priority at or below it, read without locks
		// (floor.go; claims read higher priorities whole).
		probeBelow: `SELECT priority, run_at, id FROM {{s}}.spool_jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  AND priority = $2::smallint AND (run_at, id) <= ($3::timestamptz, $4::bigint)
ORDER BY priority, run_at, id
LIMIT 1`,

		// Complete: the finish of a batch whose outcomes are all successes,
		// the common case, without finish's per-row CASEs and its second
		// data-modifying CTE. Same guard, same result rows.
		completeKeep: `UPDATE {{s}}.spool_jobs j
SET state = 'completed', finalized_at = now(), leased_until = NULL, leased_by = NULL
FROM unnest($1::bigint[], $2::integer[]) AS i(id, fence)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running'
RETURNING j.id, j.fence`,
		completeDelete: `DELETE FROM {{s}}.spool_jobs j
USING unnest($1::bigint[], $2::integer[]) AS i(id, fence)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running'
RETURNING j.id, j.fence`,

		heartbeat: `UPDATE {{s}}.spool_jobs j SET leased_until = now() + $3::bigint * interval '1 microsecond'
FROM unnest($1::bigint[], $2::integer[]) AS i(id, fence)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running'
RETURNING j.id, j.fence`,

		// Rescue: running rows whose lease ended by the DB clock go back to
		// the queue (the attempt counted) or are discarded at max attempts.
		// run_at is kept: a rescued job keeps its place in the queue rather
		// than wait behind the backlog that arrived while it was leased.
		rescue: `WITH expired AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state = 'running' AND leased_until < now()
  ORDER BY leased_until
  LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j SET
  state = (CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'retryable' END)::{{s}}.spool_job_state,
  finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
  leased_until = NULL,
  leased_by = NULL,
  errors = coalesce(j.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', j.attempt, 'at', now(),
    'error', 'lease expired: the worker ' || coalesce(j.leased_by, '') || ' stopped heartbeating (crashed, killed, paused or cut off from the database)'))
FROM expired e WHERE j.id = e.id
RETURNING j.state::text, j.queue, j.priority, j.run_at, j.id`,

		// Cleanup: $1..$3 are ages in microseconds for completed, discarded
		// and cancelled rows; 0 keeps that state.
		cleanup: `WITH doomed AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND $1::bigint > 0 AND finalized_at < now() - $1::bigint * interval '1 microsecond')
      OR (state = 'discarded' AND $2::bigint > 0 AND finalized_at < now() - $2::bigint * interval '1 microsecond')
      OR (state = 'cancelled' AND $3::bigint > 0 AND finalized_at < now() - $3::bigint * interval '1 microsecond'))
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
DELETE FROM {{s}}.spool_jobs j USING doomed d WHERE j.id = d.id`,

		// Insert any number of rows in one statement; ids come back in input
		// order because nextval runs in ORDER BY ord order.
		insert: `INSERT INTO {{s}}.spool_jobs (queue, kind, args, priority, run_at, state, max_attempts, tags, metadata)
SELECT t.queue, t.kind, t.args, t.priority, t.at,
  (CASE WHEN t.at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state,
  t.max_attempts, string_to_array(t.tags, ','), coalesce(t.metadata, '{}'::jsonb)
FROM (
  SELECT u.*, coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond') AS at
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::timestamptz[], $6::bigint[],
              $7::smallint[], $8::text[], $9::jsonb[])
    WITH ORDINALITY AS u(queue, kind, args, priority, run_at, delay_us, max_attempts, tags, metadata, ord)
) t
ORDER BY t.ord
RETURNING id`,

		now: `SELECT now()`,

		get: `SELECT {{cols}} FROM {{s}}.spool_jobs WHERE id = $1`,

		list: `SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
  AND (cardinality($3::text[]) = 0 OR state::text = ANY($3::text[]))
  AND id > $4
ORDER BY id
LIMIT $5`,

		// Retry: a finished or pending job becomes available now with a fresh
		// set of attempts. fence is kept, so old leases stay fenced out.
		retry: `UPDATE {{s}}.spool_jobs j SET state = 'available', attempt = 0, run_at = now(), finalized_at = NULL
WHERE j.id = $1 AND j.state <> 'running'
RETURNING {{jcols}}`,

		// Cancel: a running job keeps no lease; its holder sees the loss at its
		// next heartbeat and its late writes are fenced out by state.
		cancel: `UPDATE {{s}}.spool_jobs j SET state = 'cancelled', finalized_at = now(), leased_until = NULL, leased_by = NULL
WHERE j.id = $1 AND j.state NOT IN ('completed', 'discarded', 'cancelled')
RETURNING {{jcols}}`,

		stats: `SELECT queue, state::text, count(*) FROM {{s}}.spool_jobs GROUP BY 1, 2 ORDER BY 1, 2`,

		leaderElect: `INSERT INTO {{s}}.spool_leader AS l (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, now(), now() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
  leader_id = EXCLUDED.leader_id,
  expires_at = EXCLUDED.expires_at,
  elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE now() END
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
RETURNING leader_id`,

		leaderResign: `DELETE FROM {{s}}.spool_leader WHERE name = $1 AND leader_id = $2`,

		schemaVersion: `SELECT coalesce(max(version), 0) FROM {{s}}.spool_migrations`,

		// Optimistic strategy (spool_claim=optimistic): the queue's head read
		// without locks, then a claim of the picked rows that applies only
		// where the fence (the row's version) and the pending state are as
		// read. Arrays are sorted by id and the claim runs as a nested loop
		// (see claimOptimistic), so concurrent claims lock rows in one order.
		optimisticWindow: `SELECT id, fence, priority FROM {{s}}.spool_jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
ORDER BY priority, run_at, id
LIMIT $2`,
		optimisticClaim: `UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = j.fence + 1,
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM unnest($1::bigint[], $2::integer[]) AS c(id, fence)
WHERE j.id = c.id AND j.fence = c.fence AND j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= now()
RETURNING {{jcols}}`,
	}
	for _, p := range []*string{&q.claim, &q.releaseClaim, &q.finish, &q.completeKeep, &q.completeDelete, &q.probeBelow, &q.heartbeat, &q.rescue, &q.cleanup, &q.insert,
		&q.now, &q.get, &q.list, &q.retry, &q.cancel, &q.stats, &q.leaderElect, &q.leaderResign, &q.schemaVersion,
		&q.optimisticWindow, &q.optimisticClaim} {
		*p = r.Replace(*p)
	}
	return q
}
