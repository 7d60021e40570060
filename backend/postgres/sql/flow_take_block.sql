-- Flow take ($1 queue, $3 lease us, $4 claim id; $2 unused, each 1) from
-- ordered keys $5: each key's oldest pending job, if due
-- (spool_jobs_flow_order). No SKIP LOCKED: a locked head must not let the
-- next job pass it.
WITH ep AS MATERIALIZED (SELECT {{s}}.spool_claim_epoch() AS e),
picked AS MATERIALIZED (
  SELECT h.id FROM unnest($5::text[], $2::int[]) AS w(key, n)
  CROSS JOIN LATERAL (
    SELECT id, run_at FROM {{s}}.spool_jobs
    WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = $1 AND flow_key = w.key
    ORDER BY id
    LIMIT 1
    FOR UPDATE
  ) h
  WHERE h.run_at <= now() AND w.n > 0
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM picked, ep WHERE j.id = picked.id
RETURNING {{jcols}}
