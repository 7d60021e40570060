-- Claim: lock up to $2 due pending rows of queue $1 in claim order,
-- skipping rows other claimers hold, and lease them ($3 microseconds,
-- on the DB clock) to claim $4. Rows of the floor's priority $5 are
-- read only above the floor ($5, $6, $7; floor.go); rows of a higher
-- priority (lower number) always, so a job of a higher priority that
-- became due (a scheduled job, a retry) is never behind a floor.
-- Nothing is claimed from a paused queue (spool_queues.paused_at set).
-- Rows come back in no particular order (the caller sorts them).
-- MATERIALIZED keeps each LIMIT binding: without it the planner may
-- re-run a subquery per row and lock more rows than it claims.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
higher AS MATERIALIZED (
  SELECT id, ctid AS tid, true AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < $5::smallint
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id, ctid AS tid, true AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)
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
{{claim_write}}
