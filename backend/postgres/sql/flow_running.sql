-- The queue's running jobs by flow key: with a lease not yet ended (Live),
-- and all of them. leased_until is set exactly on running rows
-- (spool_jobs_lease_when_running), so the lease index finds them.
SELECT coalesce(flow_key, ''), count(*) FILTER (WHERE leased_until > now()), count(*)
FROM {{s}}.spool_jobs
WHERE leased_until IS NOT NULL AND state = 'running' AND queue = $1
GROUP BY 1
