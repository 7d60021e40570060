-- Up to ? flow keys after ? with pending jobs in queue ?, ascending: a skip
-- scan of spool_jobs_flow, one seek per key. Params: queue, after, queue,
-- limit.
WITH RECURSIVE k (fkey) AS (
  SELECT (SELECT flow_key FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_flow)
          WHERE queue = ? AND pending = 1 AND flow_key > ?
          ORDER BY flow_key LIMIT 1)
  UNION ALL
  SELECT (SELECT j.flow_key FROM {{db}}.spool_jobs j FORCE INDEX (spool_jobs_flow)
          WHERE j.queue = ? AND j.pending = 1 AND j.flow_key > k.fkey
          ORDER BY j.flow_key LIMIT 1)
  FROM k WHERE k.fkey IS NOT NULL
)
SELECT fkey FROM k WHERE fkey IS NOT NULL LIMIT ?
