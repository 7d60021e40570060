-- Heartbeat: extend the leases ($1 ids, $2 fences) of running jobs by $3
-- microseconds on the DB clock, never moving a lease back (a client's beats
-- may land out of order). Rows not returned lost their lease.
UPDATE {{s}}.spool_jobs j SET leased_until = greatest(j.leased_until, now() + $3::bigint * interval '1 microsecond')
FROM unnest($1::bigint[], $2::integer[]) AS i(id, fence)
WHERE j.id = i.id AND j.fence = i.fence AND j.state = 'running'
RETURNING j.id, j.fence
