-- Queue ?'s running (lease not ended) and pending jobs by flow key.
SELECT coalesce(flow_key, ''),
  coalesce(sum(state = 'running' AND leased_until > UTC_TIMESTAMP(6)), 0),
  coalesce(sum(pending), 0)
FROM {{db}}.spool_jobs
WHERE queue = ? AND state IN ('available', 'scheduled', 'retryable', 'running')
GROUP BY 1
