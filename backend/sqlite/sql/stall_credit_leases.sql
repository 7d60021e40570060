-- Credit a stall of ?1 microseconds to every lease still running at ?2,
-- when the uncredited part of the stall began.
UPDATE spool_jobs INDEXED BY spool_jobs_leased
SET leased_until = leased_until + ?1
WHERE state = 'running' AND leased_until >= ?2
