-- Flow take: due pending jobs of a queue, whatever their key, in claim
-- order. "LIMIT n FOR UPDATE SKIP LOCKED" is appended. Params: queue, now.
SELECT {{cols}} FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= CAST(? AS DATETIME(6))
ORDER BY priority, run_at, id
