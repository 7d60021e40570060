-- The completions a lease guard's leases applied (completeFast, after an
-- autocommit completion matched fewer rows than it named): a kept job
-- completed under its lease's fence, which only that lease's outcome
-- writes. The id list, then the lease guard, are appended.
SELECT id FROM {{db}}.spool_jobs WHERE state = 'completed' AND id IN 
