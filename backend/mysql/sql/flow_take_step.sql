-- Flow take of an ordered key whose jobs step aside: its oldest due
-- pending job, locked without SKIP LOCKED. Params: queue, key, now.
SELECT {{cols}} FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow_order)
WHERE queue = ? AND flow_wait = ? AND run_at <= CAST(? AS DATETIME(6))
ORDER BY id
LIMIT 1
FOR UPDATE
