-- The first due pending jobs of a queue in claim order, with their keys,
-- read without locks: jobs without a key are taken from among them.
-- "LIMIT n" is appended. Params: queue, now.
SELECT id, flow_key IS NULL FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= CAST(? AS DATETIME(6))
ORDER BY priority, run_at, id
