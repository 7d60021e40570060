-- Up to ?3 flow keys after ?2 with pending jobs in queue ?1, ascending: a
-- skip scan of spool_jobs_flow, one seek per key.
WITH RECURSIVE k(key) AS (
  SELECT (SELECT flow_key FROM spool_jobs INDEXED BY spool_jobs_flow
          WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable') AND flow_key IS NOT NULL AND queue = ?1 AND flow_key > ?2
          ORDER BY flow_key LIMIT 1)
  UNION ALL
  SELECT (SELECT j.flow_key FROM spool_jobs AS j INDEXED BY spool_jobs_flow
          WHERE (j.state = 'available' OR j.state = 'scheduled' OR j.state = 'retryable') AND j.flow_key IS NOT NULL AND j.queue = ?1 AND j.flow_key > k.key
          ORDER BY j.flow_key LIMIT 1)
  FROM k WHERE k.key IS NOT NULL
)
SELECT key FROM k WHERE key IS NOT NULL LIMIT ?3
