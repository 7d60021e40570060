-- Queue ?'s running jobs by flow key: lease not ended at ?, and all.
-- leased_until is set exactly on running rows, so the lease index finds
-- them.
SELECT coalesce(flow_key, ''), sum(leased_until > CAST(? AS DATETIME(6))), count(*)
FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_leased)
WHERE leased_until IS NOT NULL AND state = 'running' AND queue = ?
GROUP BY 1
