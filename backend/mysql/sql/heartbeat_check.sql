-- Heartbeat check: when the heartbeat matched fewer rows than leases
-- were sent, the running rows' fences say which leases still hold. The
-- id list is appended.
SELECT id, fence FROM {{db}}.spool_jobs WHERE state = 'running' AND id IN 
