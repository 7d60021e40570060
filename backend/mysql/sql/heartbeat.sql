-- Heartbeat: extend live leases, never moving one back (a client's beats
-- may land out of order); "id IN (…)" and the lease guard
-- (leaseGuard) are appended. When fewer rows match than leases were sent,
-- heartbeatCheck finds which still hold.
UPDATE {{db}}.spool_jobs SET leased_until = GREATEST(COALESCE(leased_until, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE state = 'running' AND id IN 
