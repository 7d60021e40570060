-- Heartbeat: extend live leases; "id IN (…) AND (id, fence) IN (…)"
-- is appended. When fewer rows match than leases were sent,
-- heartbeatCheck finds which still hold.
SELECT id, fence FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN 
