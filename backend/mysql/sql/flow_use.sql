-- Queue ?'s running (lease not ended) and pending jobs by flow key: the
-- running ones from the lease index, the pending ones from the claim index
-- (one condition on both sets of states read the table: 0.4 s with 10^6
-- jobs). The queue is bound twice.
SELECT key_, sum(running), sum(pending_) FROM (
  SELECT coalesce(flow_key, '') AS key_, sum(leased_until > UTC_TIMESTAMP(6)) AS running, 0 AS pending_
  FROM {{db}}.spool_jobs
  WHERE leased_until IS NOT NULL AND queue = ? AND state = 'running'
  GROUP BY 1
  UNION ALL
  SELECT coalesce(flow_key, ''), 0, count(*)
  FROM {{db}}.spool_jobs
  WHERE queue = ? AND pending = 1
  GROUP BY 1
) u
GROUP BY key_
