-- Flow take ($1 queue, $2 max, $3 lease us, $4 claim id) of jobs without
-- a key, among the first $5 due pending jobs of the queue in claim order:
-- they have no index of their own, so the look is bounded.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
head AS MATERIALIZED (
  SELECT id, flow_key FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  ORDER BY priority, run_at, id
  LIMIT $5
),
picked AS MATERIALIZED (
  SELECT j.id FROM {{s}}.spool_jobs j
  WHERE j.id IN (SELECT id FROM head WHERE flow_key IS NULL)
    AND j.state IN ('available', 'scheduled', 'retryable')
  ORDER BY j.priority, j.run_at, j.id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM picked, ep WHERE j.id = picked.id
RETURNING {{jcols}}
