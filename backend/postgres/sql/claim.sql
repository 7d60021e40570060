-- Claim: lock up to $2 due pending rows of queue $1 in claim order,
-- skipping rows other claimers hold, and lease them ($3 microseconds,
-- on the DB clock) to claim $4. Rows of the floor's priority are read
-- only above the floor (floor.go); rows of a higher priority (lower
-- number) always, so a job of a higher priority that became due (a
-- scheduled job, a retry) is never behind a floor. The floor is the
-- process's own ($5, $6, $7) or, when $8, the queue's shared floor in
-- spool_claim_floors if that is higher (under the claim lock it is where
-- the last claim of any process ended), but never above the cap ($10,
-- $11, $12; none when NULL): a row the process was told of lies above it.
-- When $9 (the claim lock is held) the claim writes its own end there.
-- Nothing is claimed from a paused queue (spool_queues.paused_at set).
-- Rows come back in no particular order (the caller sorts them).
-- MATERIALIZED keeps each LIMIT binding: without it the planner may
-- re-run a subquery per row and lock more rows than it claims.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
fl AS MATERIALIZED (
  SELECT CASE WHEN c.capped THEN $10::smallint ELSE m.priority END AS priority,
    CASE WHEN c.capped THEN $11::timestamptz ELSE m.run_at END AS run_at,
    CASE WHEN c.capped THEN $12::bigint ELSE m.id END AS id
  FROM (
    SELECT CASE WHEN h.shared THEN f.priority ELSE $5::smallint END AS priority,
      CASE WHEN h.shared THEN f.run_at ELSE $6::timestamptz END AS run_at,
      CASE WHEN h.shared THEN f.id ELSE $7::bigint END AS id
    FROM (SELECT) one
    LEFT JOIN {{s}}.spool_claim_floors f ON f.queue = $1 AND $8::boolean
    CROSS JOIN LATERAL (SELECT f.queue IS NOT NULL
      AND (f.priority, f.run_at, f.id) > ($5::smallint, $6::timestamptz, $7::bigint) AS shared) h
  ) m
  CROSS JOIN LATERAL (SELECT $10::smallint IS NOT NULL
    AND ($10::smallint, $11::timestamptz, $12::bigint) < (m.priority, m.run_at, m.id) AS capped) c
),
higher AS MATERIALIZED (
  SELECT id, ctid AS tid, true AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < (SELECT fl.priority FROM fl)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id, ctid AS tid, true AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > (SELECT fl.priority, fl.run_at, fl.id FROM fl)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2 - (SELECT count(*) FROM higher)
  FOR UPDATE SKIP LOCKED
),
-- Jobs without a unique key or a flow key, in no batch (leasable; a
-- workflow's tasks are leasable since schema 28), leave spool_jobs for
-- lease rows of up to 64 (schema 12); claim_in_place.sql, the same claim
-- with leasable false, keeps every job in place. Each of the two writes
-- below takes only its own jobs.
{{claim_moves}},
-- The shared floor rises to this claim's last job, or stays at the floor
-- it started from when it took nothing above it (ends: the start and the
-- jobs' keys; the last by priority, then run_at, then id). Only under the
-- claim lock ($9): the claims that write it then follow each other's
-- commits, and without the lock concurrent claims would queue on this
-- row's lock.
ends AS MATERIALIZED (
  SELECT fl.priority, fl.run_at, fl.id FROM fl
  UNION ALL SELECT g.priority, g.run_at, g.id FROM gone g
  UNION ALL SELECT u.priority, u.run_at, u.id FROM updated u
),
frontier AS (
  INSERT INTO {{s}}.spool_claim_floors AS f (queue, priority, run_at, id)
  SELECT $1, p.v, r.v, (SELECT max(e.id) FROM ends e WHERE e.priority = p.v AND e.run_at = r.v)
  FROM (SELECT max(e.priority) AS v FROM ends e) p
  CROSS JOIN LATERAL (SELECT max(e.run_at) AS v FROM ends e WHERE e.priority = p.v) r
  WHERE $9::boolean
  ON CONFLICT (queue) DO UPDATE SET priority = excluded.priority, run_at = excluded.run_at, id = excluded.id
)
{{claim_rows}}
