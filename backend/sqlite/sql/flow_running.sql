-- Queue ?1's running jobs by flow key: with a lease not ended at ?2, and all.
SELECT coalesce(flow_key, ''), sum(leased_until > ?2), count(*)
FROM spool_jobs INDEXED BY spool_jobs_leased
WHERE leased_until IS NOT NULL AND state = 'running' AND queue = ?1
GROUP BY 1
