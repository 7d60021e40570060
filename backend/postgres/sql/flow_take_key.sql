-- Flow take ($1 queue, $3 lease us, $4 claim id) from keys $5, up to $2[i]
-- of key $5[i]'s due pending jobs in claim order (spool_jobs_flow, one
-- index scan per key).
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
picked AS MATERIALIZED (
  SELECT p.id FROM unnest($5::text[], $2::int[]) AS w(key, n)
  CROSS JOIN LATERAL (
    SELECT id FROM {{s}}.spool_jobs
    WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = $1 AND flow_key = w.key AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT w.n
    FOR UPDATE SKIP LOCKED
  ) p
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM picked, ep WHERE j.id = picked.id
RETURNING {{jcols}}
