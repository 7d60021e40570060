-- Flow take: a key's due pending jobs in claim order. "LIMIT n FOR UPDATE
-- SKIP LOCKED" is appended. Params: queue, key, now.
SELECT {{cols}} FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow)
WHERE queue = ? AND flow_wait = ? AND run_at <= CAST(? AS DATETIME(6))
ORDER BY priority, run_at, id
