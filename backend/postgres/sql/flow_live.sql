-- The queue's running jobs with a lease not yet ended, by flow key: what
-- flow_running.sql reads when the claim does not count the jobs whose
-- lease ended (no ordered keys). Bounded to leases ending after now, the
-- scan of the lease index steps over only the entries of jobs claimed
-- within about one lease duration, not those of every job finished since
-- the last VACUUM.
SELECT coalesce(flow_key, ''), count(*)
FROM {{s}}.spool_jobs
WHERE leased_until > now() AND state = 'running' AND queue = $1
GROUP BY 1
