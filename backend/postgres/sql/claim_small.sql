-- Claim, small form: claim.sql's choice of rows (the same two arms under
-- the floor, the same paused check, the same parameters), every row
-- updated in place. For claims expected to take few jobs (smallClaimMax):
-- a lease row costs the start-up of claim.sql's and finish_leased.sql's
-- three data-modifying parts each, paid whatever they touch, which a small
-- claim does not earn back (BENCHMARKS.md, "The small claim in place").
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
higher AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND priority < $5::smallint
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
),
above AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
    AND (priority, run_at, id) > ($5::smallint, $6::timestamptz, $7::bigint)
    AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_queues q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id
  LIMIT $2 - (SELECT count(*) FROM higher)
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
  leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM (SELECT id FROM higher UNION ALL SELECT id FROM above) p, ep
WHERE j.id = p.id
RETURNING {{jcols}}
