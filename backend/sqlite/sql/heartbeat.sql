-- Heartbeat (?1 now, ?2 lease, ?3 JSON array of [id, fence]): extend the
-- leases of running jobs, never moving one back (a client's beats may land
-- out of order). Rows not returned lost their lease.
UPDATE spool_jobs AS j SET leased_until = max(coalesce(j.leased_until, 0), ?1 + ?2)
FROM (SELECT e.value->>0 AS fid, e.value->>1 AS ffence FROM json_each(?3) AS e) AS i
WHERE j.id = i.fid AND j.fence = i.ffence AND j.state = 'running'
RETURNING id, fence
