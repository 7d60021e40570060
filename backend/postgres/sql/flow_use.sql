-- The queue's running (lease not ended) and pending jobs by flow key.
SELECT coalesce(flow_key, ''),
  count(*) FILTER (WHERE state = 'running' AND leased_until > now()),
  count(*) FILTER (WHERE state IN ('available', 'scheduled', 'retryable'))
FROM {{s}}.spool_jobs
WHERE queue = $1 AND state IN ('available', 'scheduled', 'retryable', 'running')
GROUP BY 1
