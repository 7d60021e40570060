-- Flow take ($1 queue, $3 lease us, $4 claim id; $2 unused, always 1) of
-- ordered key $5 whose jobs step aside: its oldest due pending job
-- (spool_jobs_flow_order). No SKIP LOCKED, as in flow_take_block.sql.
WITH picked AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('available', 'scheduled', 'retryable') AND flow_key IS NOT NULL AND queue = $1 AND flow_key = $5 AND run_at <= now() AND $2::int > 0
  ORDER BY id
  LIMIT 1
  FOR UPDATE
)
UPDATE {{s}}.spool_jobs j
SET state = 'running', attempt = j.attempt + 1, fence = j.fence + 1,
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
FROM picked WHERE j.id = picked.id
RETURNING {{jcols}}
