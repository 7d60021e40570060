-- Queue ?1's running (lease not ended at ?2) and pending jobs by flow key.
SELECT coalesce(flow_key, ''),
  sum(state = 'running' AND leased_until > ?2),
  sum(state IN ('available', 'scheduled', 'retryable'))
FROM spool_jobs
WHERE queue = ?1 AND state IN ('available', 'scheduled', 'retryable', 'running')
GROUP BY 1
