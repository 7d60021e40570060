-- Claim in place (Options.Claims in place): claim.sql, the same
-- parameters, arms and writes, with leasable false, so every job stays in
-- spool_jobs, updated in place. The arms keep claim.sql's expression
-- (false AND …): TestClaimVariants holds the two claims to differing in
-- that one word.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
higher AS MATERIALIZED (
  SELECT id, ctid AS tid, false AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < $5::smallint
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id, ctid AS tid, false AND unique_key IS NULL AND flow_key IS NULL AND batch_id IS NULL AS leasable FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2 - (SELECT count(*) FROM higher)
  FOR UPDATE SKIP LOCKED
),
-- claim.sql with leasable false: every job stays in spool_jobs, updated
-- in place (Options.Claims in place). Each of the two writes below takes
-- only its own jobs.
{{claim_write}}
