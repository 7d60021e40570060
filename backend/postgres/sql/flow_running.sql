-- The queue's running jobs by flow key: with a lease not yet ended (Live),
-- and all of them, from spool_jobs_running (by queue and lease end).
-- Jobs in lease rows (schema 12) count under no key.
SELECT key, sum(live)::bigint, sum(n)::bigint FROM (
  SELECT coalesce(flow_key, '') AS key, count(*) FILTER (WHERE leased_until > now()) AS live, count(*) AS n
  FROM {{s}}.spool_jobs
  WHERE leased_until IS NOT NULL AND state = 'running' AND queue = $1
  GROUP BY 1
  UNION ALL
  SELECT '', CASE WHEN leased_until > now() THEN cardinality(ids) - cardinality(done) ELSE 0 END,
    cardinality(ids) - cardinality(done)
  FROM {{s}}.spool_leases WHERE queue = $1
) r
GROUP BY key
