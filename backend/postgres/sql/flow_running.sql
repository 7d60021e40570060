-- The queue's running jobs by flow key: with a lease not yet ended (Live),
-- and all of them, from spool_jobs_running (by queue and lease end).
SELECT coalesce(flow_key, ''), count(*) FILTER (WHERE leased_until > now()), count(*)
FROM {{s}}.spool_jobs
WHERE leased_until IS NOT NULL AND state = 'running' AND queue = $1
GROUP BY 1
