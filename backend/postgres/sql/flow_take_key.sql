-- Flow take ($1 queue, $2 max, $3 lease us, $4 claim id) of key $5's due
-- pending jobs in claim order (spool_jobs_flow).
WITH picked AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = $1 AND flow_key = $5 AND run_at <= now()
  ORDER BY priority, run_at, id
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = j.fence + 1,
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM picked WHERE j.id = picked.id
RETURNING {{jcols}}
