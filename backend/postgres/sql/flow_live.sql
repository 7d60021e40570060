-- The queue's running jobs with a lease not yet ended, by flow key: what
-- flow_running.sql reads when the claim does not count the jobs whose
-- lease ended (no ordered keys). Bounded to leases ending after now, its
-- scan of spool_jobs_running (by queue and lease end) steps over only the
-- entries of the queue's jobs claimed within about one lease duration, not
-- those of every job of the queue finished since the last VACUUM.
-- Jobs in lease rows (schema 12) count under no key.
SELECT key, sum(n)::bigint FROM (
  SELECT coalesce(flow_key, '') AS key, count(*) AS n
  FROM {{s}}.spool_jobs
  WHERE leased_until > now() AND state = 'running' AND queue = $1
  GROUP BY 1
  UNION ALL
  SELECT '', cardinality(ids) - cardinality(done) FROM {{s}}.spool_leases
  WHERE queue = $1 AND leased_until > now()
) r
GROUP BY key
